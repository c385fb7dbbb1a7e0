// assetpatch.hpp — header-only C++17 wrapper for libassetpatch (see assetpatch.h).
//
//   assetpatch::client c("/var/lib/game/assets", "/usr/share/game");
//   c.set("manifest_url", "https://cdn.example/game/manifest.json");
//   c.update([](const assetpatch::progress& p) { std::cerr << p.bytes_done << "\n"; return false; });
//   std::filesystem::path p = c.resolve("sub/sample.png");
//
// Every call comes in two forms: `resolve` throws assetpatch::error (status(), name(), what() =
// the library's message); `try_resolve` returns a result (assetpatch_result.hpp) and throws
// nothing of its own. Built with -fno-exceptions, only the try_* forms (and `client::try_open`)
// are declared. A client owns its handle (move-only); destructors never throw. Callbacks run on
// the updating thread; an exception thrown by one cancels the update and is rethrown from the
// call that ran it (a C++ exception must never unwind through the library's frames).
#ifndef ASSETPATCH_HPP
#define ASSETPATCH_HPP

#include <assetpatch.h>

#include "assetpatch_callbacks.hpp"
#include "assetpatch_result.hpp"

#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace assetpatch {

namespace detail {
struct client_deleter {
    void operator()(assetpatch_client* c) const noexcept { assetpatch_client_close(c); }
};

// A call that returned `rc`: its failure (rc < 0), or nothing.
inline std::optional<failure> failed(int rc) {
    if (rc < 0) return failure::last(rc);
    return std::nullopt;
}

// Reads a string the library writes into a caller's buffer (ERR_RANGE: asks again with the
// length it reported).
template <class Call> result<std::string> read_string(std::size_t first_size, Call call) {
    std::string out(first_size, '\0');
    std::size_t len = 0;
    int rc = call(out.data(), out.size(), &len);
    if (rc == ASSETPATCH_ERR_RANGE) {
        out.resize(len + 1);
        rc = call(out.data(), out.size(), &len);
    }
    if (auto f = failed(rc)) return *f;
    out.resize(len);
    return out;
}
}  // namespace detail

/// One client of a data directory. Thread-safe like the C API; move-only.
class client {
public:
    /// Opens the data directory (created if missing) over the bundle (none: nullopt).
    static result<client> try_open(const std::filesystem::path& data_dir,
                                   const std::optional<std::filesystem::path>& bundle_dir = std::nullopt) {
        assetpatch_client* raw = nullptr;
        const std::string bundle = bundle_dir ? bundle_dir->string() : std::string();
        if (auto f = detail::failed(assetpatch_client_open(data_dir.c_str(), bundle_dir ? bundle.c_str() : nullptr, &raw))) return *f;
        return client(raw);
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

    // The calls that report failure as a result (the throwing forms follow).

    /// Sets an option (see assetpatch.h); ASSETPATCH_ERR_ARGUMENT for bad ones.
    result<void> try_set(std::string_view option, std::string_view value) {
        if (!handle_) return moved_from();
        return done(assetpatch_client_set(handle_.get(), std::string(option).c_str(), std::string(value).c_str()));
    }

    /// A newer release, or nullopt when there is nothing new.
    result<std::optional<available>> try_check() {
        if (!handle_) return moved_from();
        std::int64_t version = 0;
        std::uint64_t bytes = 0;
        const int rc = assetpatch_check(handle_.get(), &version, &bytes);
        if (auto f = detail::failed(rc)) return *f;
        if (rc == ASSETPATCH_NO_UPDATE) return std::optional<available>();
        return std::optional<available>(available{version, bytes});
    }

    /// Blocking update: true when a release was installed, false when there was nothing new.
    result<bool> try_update(progress_fn on_progress = {}) {
        if (!handle_) return moved_from();
        detail::update_context ctx(std::move(on_progress));  // alive for the whole call
        const int rc = assetpatch_update(handle_.get(), ctx.c_function(), &ctx);
        auto outcome = detail::failed(rc);  // read before anything else calls the library
        ctx.rethrow();
        if (outcome) return *outcome;
        return rc == ASSETPATCH_OK;
    }

    /// Runs an update on a background thread; collect its result with try_wait().
    result<void> try_start_update(progress_fn on_progress = {}) {
        if (!handle_) return moved_from();
        auto ctx = std::make_unique<detail::update_context>(std::move(on_progress));
        std::lock_guard<std::mutex> lock(callbacks_->mutex);
        if (auto f = detail::failed(assetpatch_update_start(handle_.get(), ctx->c_function(), ctx.get()))) return *f;
        // Accepted: no update runs any more on the previous context, so it can go.
        callbacks_->background = std::move(ctx);
        return {};
    }

    /// Waits for the background update's result: true installed, false nothing new, its
    /// failure as this result's. nullopt when still running after `timeout` (negative: wait
    /// forever).
    result<std::optional<bool>> try_wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1)) {
        if (!handle_) return moved_from();
        int outcome = 0;
        const int rc = assetpatch_update_wait(handle_.get(), static_cast<int>(timeout.count()), &outcome);
        if (rc == ASSETPATCH_ERR_BUSY) return std::optional<bool>();
        if (auto f = detail::failed(rc)) return *f;
        auto f = detail::failed(outcome);  // the update's message is this thread's after the wait
        {
            std::lock_guard<std::mutex> lock(callbacks_->mutex);
            if (callbacks_->background) callbacks_->background->rethrow();
        }
        if (f) return *f;
        return std::optional<bool>(outcome == ASSETPATCH_OK);
    }

    /// Asks a running update to stop soon.
    void cancel() noexcept { assetpatch_cancel(handle_.get()); }
    /// Pauses every transfer of this client; resume() lets them go on (see assetpatch_pause).
    void pause() noexcept { assetpatch_pause(handle_.get()); }
    void resume() noexcept { assetpatch_resume(handle_.get()); }

    /// The absolute path a resource name resolves to (release first, then bundle).
    result<std::filesystem::path> try_resolve(std::string_view name) const {
        if (!handle_) return moved_from();
        const std::string n(name);
        auto path = detail::read_string(256, [&](char* buf, std::size_t size, std::size_t* len) {
            return assetpatch_resolve(handle_.get(), n.c_str(), buf, size, len);
        });
        if (!path) return path.error();
        return std::filesystem::path(std::move(*path));
    }

    /// What the last check or update found and why it found nothing to install
    /// (assetpatch_last_check); nullopt before the first. An older manifest than one accepted
    /// before (a stale cache edge) is no update with reason ASSETPATCH_REASON_OLDER.
    result<std::optional<assetpatch_check_outcome>> try_last_check() const {
        if (!handle_) return moved_from();
        assetpatch_check_outcome out = ASSETPATCH_CHECK_OUTCOME_INIT;
        const int rc = assetpatch_last_check(handle_.get(), &out);
        if (rc == ASSETPATCH_ERR_STATE) return std::optional<assetpatch_check_outcome>();
        if (auto f = detail::failed(rc)) return *f;
        return std::optional<assetpatch_check_outcome>(out);
    }

    /// Each source (manifest_url, then the mirrors option's URLs) as the last check or update
    /// left it (assetpatch_source_at); empty without mirrors or before the first.
    result<std::vector<assetpatch_source_info>> try_sources() const {
        if (!handle_) return moved_from();
        std::size_t count = 0;
        if (auto f = detail::failed(assetpatch_source_count(handle_.get(), &count))) return *f;
        std::vector<assetpatch_source_info> out;
        for (std::size_t i = 0; i < count; ++i) {
            assetpatch_source_info s = ASSETPATCH_SOURCE_INFO_INIT;
            if (auto f = detail::failed(assetpatch_source_at(handle_.get(), i, &s))) return *f;
            out.push_back(s);
        }
        return out;
    }

    /// The active release's version; 0 when only the bundle is served.
    result<std::int64_t> try_current_version() const {
        if (!handle_) return moved_from();
        std::int64_t v = 0;
        if (auto f = detail::failed(assetpatch_current(handle_.get(), &v))) return *f;
        return v;
    }

    /// Confirms the active release: never rolled back automatically (max_failed_launches).
    result<void> try_mark_good() {
        if (!handle_) return moved_from();
        return done(assetpatch_mark_good(handle_.get()));
    }

    /// Goes back to the newest kept release, or the bundle; returns the version now served
    /// (0: the bundle). Updates skip the version left until a newer one is published.
    result<std::int64_t> try_rollback() {
        if (!handle_) return moved_from();
        if (auto f = detail::failed(assetpatch_rollback(handle_.get()))) return *f;
        return try_current_version();
    }

    /// Drops every release and partial download; serves the bundle only.
    result<void> try_reset() {
        if (!handle_) return moved_from();
        return done(assetpatch_reset(handle_.get()));
    }

    /// The release `which` names (ASSETPATCH_RELEASE_ACTIVE, _PENDING, or _CANDIDATE: what the
    /// last check found); nullopt when there is none.
    result<std::optional<assetpatch_release_info>> try_release(int which = ASSETPATCH_RELEASE_ACTIVE) const {
        if (!handle_) return moved_from();
        assetpatch_release_info out = ASSETPATCH_RELEASE_INFO_INIT;
        const int rc = assetpatch_release_get(handle_.get(), which, &out);
        if (rc == ASSETPATCH_ERR_NOT_FOUND) return std::optional<assetpatch_release_info>();
        if (auto f = detail::failed(rc)) return *f;
        return std::optional<assetpatch_release_info>(out);
    }

    /// The release's notes ("" when it has none).
    result<std::string> try_release_notes(int which = ASSETPATCH_RELEASE_ACTIVE) const {
        if (!handle_) return moved_from();
        return detail::read_string(1024, [&](char* buf, std::size_t size, std::size_t* len) {
            return assetpatch_release_notes(handle_.get(), which, buf, size, len);
        });
    }

    /// The address of `symbol` (empty: the declared entry) in plugin `name` of the active release,
    /// loaded from verified bytes (assetpatch_plugin_load).
    result<void*> try_load_plugin(const std::string& name, const std::string& symbol = std::string()) {
        if (!handle_) return moved_from();
        void* address = nullptr;
        if (auto f = detail::failed(assetpatch_plugin_load(handle_.get(), name.c_str(), symbol.empty() ? nullptr : symbol.c_str(), &address)))
            return *f;
        return address;
    }

    /// The active release's plugins.
    result<std::vector<assetpatch_plugin_info>> try_plugins() const {
        if (!handle_) return moved_from();
        std::size_t count = 0;
        if (auto f = detail::failed(assetpatch_plugin_list(handle_.get(), nullptr, 0, &count))) return *f;
        const assetpatch_plugin_info init = ASSETPATCH_PLUGIN_INFO_INIT;
        std::vector<assetpatch_plugin_info> out(count, init);
        if (auto f = detail::failed(assetpatch_plugin_list(handle_.get(), count ? out.data() : nullptr, out.size(), &count))) return *f;
        out.resize(count < out.size() ? count : out.size());
        return out;
    }

    /// Bytes used by installed releases and by downloads (hard links counted once).
    result<std::pair<std::uint64_t, std::uint64_t>> try_disk_usage() const {
        if (!handle_) return moved_from();
        std::uint64_t releases = 0, downloads = 0;
        if (auto f = detail::failed(assetpatch_disk_usage(handle_.get(), &releases, &downloads))) return *f;
        return std::make_pair(releases, downloads);
    }

    /// The groups of the release this client serves, in its order (from memory).
    result<std::vector<assetpatch_group_info>> try_groups() const {
        if (!handle_) return moved_from();
        std::size_t count = 0;
        if (auto f = detail::failed(assetpatch_group_count(handle_.get(), &count))) return *f;
        std::vector<assetpatch_group_info> out;
        for (std::size_t i = 0; i < count; ++i) {
            assetpatch_group_info g = ASSETPATCH_GROUP_INFO_INIT;
            if (auto f = detail::failed(assetpatch_group_at(handle_.get(), i, &g))) return *f;
            out.push_back(g);
        }
        return out;
    }

    /// One group's state (from memory; ERR_NOT_FOUND for no such group).
    result<assetpatch_group_info> try_group(const std::string& name) const {
        if (!handle_) return moved_from();
        assetpatch_group_info out = ASSETPATCH_GROUP_INFO_INIT;
        if (auto f = detail::failed(assetpatch_group_status(handle_.get(), name.c_str(), &out))) return *f;
        return out;
    }

    /// Fetches on-demand groups of the release this client serves (blocking, resumable).
    result<void> try_fetch_groups(const std::vector<std::string>& names, progress_fn on_progress = {}) {
        if (!handle_) return moved_from();
        std::vector<const char*> list;
        for (const auto& n : names) list.push_back(n.c_str());
        list.push_back(nullptr);
        detail::update_context ctx(std::move(on_progress));
        const int rc = assetpatch_group_fetch(handle_.get(), list.data(), ctx.c_function(), &ctx);
        auto outcome = detail::failed(rc);
        ctx.rethrow();
        if (outcome) return *outcome;
        return {};
    }

    /// Evicts an on-demand group; pins or unpins a group (never evicted for the quota).
    result<void> try_evict_group(const std::string& name) {
        if (!handle_) return moved_from();
        return done(assetpatch_group_evict(handle_.get(), name.c_str()));
    }
    result<void> try_pin_group(const std::string& name, bool on = true) {
        if (!handle_) return moved_from();
        return done(assetpatch_group_pin(handle_.get(), name.c_str(), on ? 1 : 0));
    }

    /// The data directory's lifecycle state, read now (assetpatch_lifecycle_get).
    result<assetpatch_lifecycle> try_lifecycle() const {
        if (!handle_) return moved_from();
        assetpatch_lifecycle out = ASSETPATCH_LIFECYCLE_INIT;
        if (auto f = detail::failed(assetpatch_lifecycle_get(handle_.get(), &out))) return *f;
        return out;
    }

    /// Routes the library's log lines to `fn` (empty: off). Called from the updating thread.
    result<void> try_set_log(log_fn fn) {
        if (!handle_) return moved_from();
        std::lock_guard<std::mutex> lock(callbacks_->mutex);
        if (!fn) return done(assetpatch_set_log(handle_.get(), nullptr, nullptr));
        auto ctx = std::make_unique<detail::log_context>(std::move(fn));
        if (auto f = detail::failed(assetpatch_set_log(handle_.get(), &detail::log_context::trampoline, ctx.get()))) return *f;
        callbacks_->logs.push_back(std::move(ctx));
        return {};
    }

    /// Makes `fn` perform every later request in place of libcurl (empty: libcurl again).
    result<void> try_set_transport(transport_fn fn) {
        if (!handle_) return moved_from();
        std::lock_guard<std::mutex> lock(callbacks_->mutex);
        if (!fn) return done(assetpatch_set_transport(handle_.get(), nullptr));
        auto ctx = std::make_unique<detail::transport_context>(std::move(fn));
        assetpatch_transport t{sizeof(assetpatch_transport), &detail::transport_context::trampoline, ctx.get()};
        if (auto f = detail::failed(assetpatch_set_transport(handle_.get(), &t))) return *f;
        callbacks_->transports.push_back(std::move(ctx));
        return {};
    }

    /// The C handle, for calls this wrapper does not cover; nullptr once moved from.
    assetpatch_client* handle() const noexcept { return handle_.get(); }

#if ASSETPATCH_HPP_EXCEPTIONS
    // The same calls, throwing assetpatch::error.

    explicit client(const std::filesystem::path& data_dir, const std::optional<std::filesystem::path>& bundle_dir = std::nullopt)
        : client(try_open(data_dir, bundle_dir).value()) {}

    client& set(std::string_view option, std::string_view value) {
        try_set(option, value).value();
        return *this;
    }
    std::optional<available> check() { return try_check().value(); }
    bool update(progress_fn on_progress = {}) { return try_update(std::move(on_progress)).value(); }
    void start_update(progress_fn on_progress = {}) { try_start_update(std::move(on_progress)).value(); }
    std::optional<bool> wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1)) { return try_wait(timeout).value(); }
    std::filesystem::path resolve(std::string_view name) const { return try_resolve(name).value(); }
    std::optional<assetpatch_check_outcome> last_check() const { return try_last_check().value(); }
    std::vector<assetpatch_source_info> sources() const { return try_sources().value(); }
    std::int64_t current_version() const { return try_current_version().value(); }
    void mark_good() { try_mark_good().value(); }
    std::int64_t rollback() { return try_rollback().value(); }
    void reset() { try_reset().value(); }
    std::optional<assetpatch_release_info> release(int which = ASSETPATCH_RELEASE_ACTIVE) const { return try_release(which).value(); }
    std::string release_notes(int which = ASSETPATCH_RELEASE_ACTIVE) const { return try_release_notes(which).value(); }
    void* load_plugin(const std::string& name, const std::string& symbol = std::string()) { return try_load_plugin(name, symbol).value(); }
    /// `load_plugin` cast to a function pointer type, e.g. `load_plugin_as<int (*)()>("fx")`.
    template <class F> F load_plugin_as(const std::string& name, const std::string& symbol = std::string()) {
        return reinterpret_cast<F>(load_plugin(name, symbol));
    }
    std::vector<assetpatch_plugin_info> plugins() const { return try_plugins().value(); }
    std::pair<std::uint64_t, std::uint64_t> disk_usage() const { return try_disk_usage().value(); }
    assetpatch_lifecycle lifecycle() const { return try_lifecycle().value(); }
    std::vector<assetpatch_group_info> groups() const { return try_groups().value(); }
    assetpatch_group_info group(const std::string& name) const { return try_group(name).value(); }
    void fetch_groups(const std::vector<std::string>& names, progress_fn on_progress = {}) {
        try_fetch_groups(names, std::move(on_progress)).value();
    }
    void evict_group(const std::string& name) { try_evict_group(name).value(); }
    void pin_group(const std::string& name, bool on = true) { try_pin_group(name, on).value(); }
    void set_log(log_fn fn) { try_set_log(std::move(fn)).value(); }
    void set_transport(transport_fn fn) { try_set_transport(std::move(fn)).value(); }

    /// The C handle, for calls this wrapper does not cover.
    assetpatch_client* get() const {
        if (!handle_) throw error(ASSETPATCH_ERR_STATE, "client was moved from");
        return handle_.get();
    }
#endif

private:
    explicit client(assetpatch_client* raw) : callbacks_(std::make_unique<detail::callbacks>()), handle_(raw) {}

    static failure moved_from() { return failure(ASSETPATCH_ERR_STATE, "client was moved from"); }
    static result<void> done(int rc) {
        if (auto f = detail::failed(rc)) return *f;
        return {};
    }

    std::unique_ptr<detail::callbacks> callbacks_;
    std::unique_ptr<assetpatch_client, detail::client_deleter> handle_;
};

/// The loaded library's version string.
inline std::string library_version() { return assetpatch_version(); }

}  // namespace assetpatch

#endif  // ASSETPATCH_HPP
