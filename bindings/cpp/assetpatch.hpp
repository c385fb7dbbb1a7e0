// assetpatch.hpp — header-only C++17 wrapper for libassetpatch (see assetpatch.h).
//
//   assetpatch::client c("/var/lib/game/assets", "/usr/share/game");
//   c.set("manifest_url", "https://cdn.example/game/manifest.json");
//   c.update([](const assetpatch::progress& p) { std::cerr << p.bytes_done << "\n"; return false; });
//   std::filesystem::path p = c.resolve("sub/sample.png");
//
// Errors throw assetpatch::error (status(), name(), what() = the library's message). A client
// owns its handle (move-only); destructors never throw. Callbacks run on the updating thread;
// an exception thrown by one cancels the update and is rethrown from the call that ran it
// (a C++ exception must never unwind through the library's frames).
#ifndef ASSETPATCH_HPP
#define ASSETPATCH_HPP

#include <assetpatch.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace assetpatch {

/// A failed library call: the status code, its constant's name, and the library's message.
class error : public std::runtime_error {
public:
    error(int status, const std::string& message)
        : std::runtime_error(std::string(assetpatch_status_name(status)) + ": " + message), status_(status) {}
    int status() const noexcept { return status_; }
    const char* name() const noexcept { return assetpatch_status_name(status_); }

private:
    int status_;
};

enum class phase { check = ASSETPATCH_PHASE_CHECK, download = ASSETPATCH_PHASE_DOWNLOAD, install = ASSETPATCH_PHASE_INSTALL,
                   activate = ASSETPATCH_PHASE_ACTIVATE, done = ASSETPATCH_PHASE_DONE };

struct progress {
    enum phase phase;
    std::uint64_t bytes_done, bytes_total, files_done, files_total;
};

/// Return true to cancel the update.
using progress_fn = std::function<bool(const progress&)>;
using log_fn = std::function<void(int level, std::string_view message)>;

/// What check() found: the newer release's version and the bytes an update would transfer.
struct available { std::int64_t version; std::uint64_t download_bytes; };

namespace detail {
inline int check(int rc) {
    if (rc < 0) throw error(rc, assetpatch_last_error());
    return rc;
}

// What one update's progress callback reaches through userdata: the caller's function and the
// exception it threw. Each update gets its own, alive and untouched until that update has
// ended, so a second call never swaps a function out from under a running update.
struct update_context {
    explicit update_context(progress_fn fn) : on_progress(std::move(fn)) {}
    const progress_fn on_progress;

    static int trampoline(const assetpatch_progress* p, void* userdata) noexcept {
        auto* self = static_cast<update_context*>(userdata);
        if (self->failed()) return 1;
        try {
            return self->on_progress(progress{static_cast<enum phase>(p->phase), p->bytes_done, p->bytes_total,
                                              p->files_done, p->files_total}) ? 1 : 0;
        } catch (...) {
            std::lock_guard<std::mutex> lock(self->mutex_);
            self->failure_ = std::current_exception();
            return 1;
        }
    }

    assetpatch_progress_fn c_function() const { return on_progress ? &trampoline : nullptr; }

    // The exception the callback threw, once (read by the thread that collects the result).
    void rethrow() {
        std::exception_ptr f;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            f = std::exchange(failure_, nullptr);
        }
        if (f) std::rethrow_exception(f);
    }

private:
    bool failed() {
        std::lock_guard<std::mutex> lock(mutex_);
        return failure_ != nullptr;
    }
    std::mutex mutex_;
    std::exception_ptr failure_;
};

// A log function, for as long as the library may call it: set_log keeps every function it
// installed until the client closes, since a line being written on the updating thread may
// still be in the previous one when set_log returns.
struct log_context {
    explicit log_context(log_fn fn) : on_log(std::move(fn)) {}
    const log_fn on_log;

    static void trampoline(int level, const char* message, void* userdata) noexcept {
        auto* self = static_cast<log_context*>(userdata);
        try {
            self->on_log(level, message ? message : "");
        } catch (...) {
            // A logger must not fail the update; the line is dropped.
        }
    }
};

// Everything the C library reaches through userdata lives here, on the heap, so it stays put
// when the client object moves.
struct callbacks {
    std::mutex mutex;
    std::unique_ptr<update_context> background;       // the update start_update() began
    std::vector<std::unique_ptr<log_context>> logs;   // every log function installed, newest last
};

struct client_deleter {
    void operator()(assetpatch_client* c) const noexcept { assetpatch_client_close(c); }
};
}  // namespace detail

/// One client of a data directory. Thread-safe like the C API; move-only.
class client {
public:
    explicit client(const std::filesystem::path& data_dir, const std::optional<std::filesystem::path>& bundle_dir = std::nullopt)
        : callbacks_(std::make_unique<detail::callbacks>()) {
        assetpatch_client* raw = nullptr;
        const std::string bundle = bundle_dir ? bundle_dir->string() : std::string();
        detail::check(assetpatch_client_open(data_dir.c_str(), bundle_dir ? bundle.c_str() : nullptr, &raw));
        handle_.reset(raw);
    }

    client(client&&) noexcept = default;
    // Close our handle (waiting for its update) before its callbacks can be replaced.
    client& operator=(client&& other) noexcept {
        if (this != &other) {
            handle_.reset();
            callbacks_ = std::move(other.callbacks_);
            handle_ = std::move(other.handle_);
        }
        return *this;
    }
    client(const client&) = delete;
    client& operator=(const client&) = delete;
    ~client() = default;  // closes the handle first (declared last), then frees the callbacks

    /// Sets an option (see assetpatch.h); throws error(ASSETPATCH_ERR_ARGUMENT) for bad ones.
    client& set(std::string_view option, std::string_view value) {
        detail::check(assetpatch_client_set(get(), std::string(option).c_str(), std::string(value).c_str()));
        return *this;
    }

    /// A newer release, or nullopt when there is nothing new.
    std::optional<available> check() {
        std::int64_t version = 0;
        std::uint64_t bytes = 0;
        if (detail::check(assetpatch_check(get(), &version, &bytes)) == ASSETPATCH_NO_UPDATE) return std::nullopt;
        return available{version, bytes};
    }

    /// Blocking update: true when a release was installed, false when there was nothing new.
    bool update(progress_fn on_progress = {}) {
        detail::update_context ctx(std::move(on_progress));  // alive for the whole call
        int rc = assetpatch_update(get(), ctx.c_function(), &ctx);
        ctx.rethrow();
        return detail::check(rc) == ASSETPATCH_OK;
    }

    /// Runs update() on a background thread; collect the result with wait().
    void start_update(progress_fn on_progress = {}) {
        auto ctx = std::make_unique<detail::update_context>(std::move(on_progress));
        std::lock_guard<std::mutex> lock(callbacks_->mutex);
        int rc = assetpatch_update_start(get(), ctx->c_function(), ctx.get());
        detail::check(rc);
        // Accepted: no update runs any more on the previous context, so it can go.
        callbacks_->background = std::move(ctx);
    }

    /// Waits for start_update()'s result: true installed, false nothing new; throws its error.
    /// nullopt when still running after `timeout` (negative: wait forever).
    std::optional<bool> wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1)) {
        int result = 0;
        int rc = assetpatch_update_wait(get(), static_cast<int>(timeout.count()), &result);
        if (rc == ASSETPATCH_ERR_BUSY) return std::nullopt;
        detail::check(rc);
        {
            std::lock_guard<std::mutex> lock(callbacks_->mutex);
            if (callbacks_->background) callbacks_->background->rethrow();
        }
        return detail::check(result) == ASSETPATCH_OK;
    }

    /// Asks a running update to stop soon.
    void cancel() noexcept { assetpatch_cancel(handle_.get()); }

    /// The absolute path a resource name resolves to (release first, then bundle).
    std::filesystem::path resolve(std::string_view name) const {
        const std::string n(name);
        std::string path(256, '\0');
        size_t len = 0;
        int rc = assetpatch_resolve(get(), n.c_str(), path.data(), path.size(), &len);
        if (rc == ASSETPATCH_ERR_RANGE) {
            path.resize(len + 1);
            rc = assetpatch_resolve(get(), n.c_str(), path.data(), path.size(), &len);
        }
        detail::check(rc);
        path.resize(len);
        return std::filesystem::path(path);
    }

    /// What the last check() or update() found and why it found nothing to install
    /// (assetpatch_last_check); nullopt before the first. An older manifest than one accepted
    /// before (a stale cache edge) is no update with reason ASSETPATCH_REASON_OLDER.
    std::optional<assetpatch_check_outcome> last_check() const {
        assetpatch_check_outcome out = ASSETPATCH_CHECK_OUTCOME_INIT;
        const int rc = assetpatch_last_check(get(), &out);
        if (rc == ASSETPATCH_ERR_STATE) return std::nullopt;
        detail::check(rc);
        return out;
    }

    /// The active release's version; 0 when only the bundle is served.
    std::int64_t current_version() const {
        std::int64_t v = 0;
        detail::check(assetpatch_current(get(), &v));
        return v;
    }

    /// Confirms the active release: never rolled back automatically (max_failed_launches).
    void mark_good() { detail::check(assetpatch_mark_good(get())); }

    /// Goes back to the newest kept release, or the bundle; returns the version now served
    /// (0: the bundle). Updates skip the version left until a newer one is published.
    std::int64_t rollback() {
        detail::check(assetpatch_rollback(get()));
        return current_version();
    }

    /// Drops every release and partial download; serves the bundle only.
    void reset() { detail::check(assetpatch_reset(get())); }

    /// The release `which` names (ASSETPATCH_RELEASE_ACTIVE, _PENDING, or _CANDIDATE: what the
    /// last check found); nullopt when there is none.
    std::optional<assetpatch_release_info> release(int which = ASSETPATCH_RELEASE_ACTIVE) const {
        assetpatch_release_info out = ASSETPATCH_RELEASE_INFO_INIT;
        const int rc = assetpatch_release_get(get(), which, &out);
        if (rc == ASSETPATCH_ERR_NOT_FOUND) return std::nullopt;
        detail::check(rc);
        return out;
    }

    /// The release's notes ("" when it has none).
    std::string release_notes(int which = ASSETPATCH_RELEASE_ACTIVE) const {
        std::string notes(1024, '\0');
        size_t len = 0;
        int rc = assetpatch_release_notes(get(), which, notes.data(), notes.size(), &len);
        if (rc == ASSETPATCH_ERR_RANGE) {
            notes.resize(len + 1);
            rc = assetpatch_release_notes(get(), which, notes.data(), notes.size(), &len);
        }
        detail::check(rc);
        notes.resize(len);
        return notes;
    }

    /// The address of `symbol` (empty: the declared entry) in plugin `name` of the active release,
    /// loaded from verified bytes (assetpatch_plugin_load).
    void* load_plugin(const std::string& name, const std::string& symbol = std::string()) {
        void* address = nullptr;
        detail::check(assetpatch_plugin_load(get(), name.c_str(), symbol.empty() ? nullptr : symbol.c_str(), &address));
        return address;
    }

    /// `load_plugin` cast to a function pointer type, e.g. `load_plugin_as<int (*)()>("fx")`.
    template <class F> F load_plugin_as(const std::string& name, const std::string& symbol = std::string()) {
        return reinterpret_cast<F>(load_plugin(name, symbol));
    }

    /// The active release's plugins.
    std::vector<assetpatch_plugin_info> plugins() const {
        size_t count = 0;
        detail::check(assetpatch_plugin_list(get(), nullptr, 0, &count));
        const assetpatch_plugin_info init = ASSETPATCH_PLUGIN_INFO_INIT;
        std::vector<assetpatch_plugin_info> out(count, init);
        detail::check(assetpatch_plugin_list(get(), count ? out.data() : nullptr, out.size(), &count));
        out.resize(count < out.size() ? count : out.size());
        return out;
    }

    /// Bytes used by installed releases and by downloads (hard links counted once).
    std::pair<std::uint64_t, std::uint64_t> disk_usage() const {
        std::uint64_t releases = 0, downloads = 0;
        detail::check(assetpatch_disk_usage(get(), &releases, &downloads));
        return {releases, downloads};
    }

    /// The data directory's lifecycle state, read now (assetpatch_lifecycle_get).
    assetpatch_lifecycle lifecycle() const {
        assetpatch_lifecycle out = ASSETPATCH_LIFECYCLE_INIT;
        detail::check(assetpatch_lifecycle_get(get(), &out));
        return out;
    }

    /// Routes the library's log lines to `fn` (empty: off). Called from the updating thread.
    void set_log(log_fn fn) {
        std::lock_guard<std::mutex> lock(callbacks_->mutex);
        if (!fn) {
            detail::check(assetpatch_set_log(get(), nullptr, nullptr));
            return;
        }
        auto ctx = std::make_unique<detail::log_context>(std::move(fn));
        detail::check(assetpatch_set_log(get(), &detail::log_context::trampoline, ctx.get()));
        callbacks_->logs.push_back(std::move(ctx));
    }

    /// The C handle, for calls this wrapper does not cover.
    assetpatch_client* get() const {
        if (!handle_) throw error(ASSETPATCH_ERR_STATE, "client was moved from");
        return handle_.get();
    }

private:
    std::unique_ptr<detail::callbacks> callbacks_;
    std::unique_ptr<assetpatch_client, detail::client_deleter> handle_;
};

/// The loaded library's version string.
inline std::string library_version() { return assetpatch_version(); }

}  // namespace assetpatch

#endif  // ASSETPATCH_HPP
