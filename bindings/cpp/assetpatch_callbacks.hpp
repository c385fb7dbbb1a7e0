// assetpatch_callbacks.hpp — the C++ wrapper's callbacks: progress and log functions, and what
// keeps them alive while the library may call them (included by assetpatch.hpp).
#ifndef ASSETPATCH_CALLBACKS_HPP
#define ASSETPATCH_CALLBACKS_HPP

#include <assetpatch.h>

#include "assetpatch_result.hpp"

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace assetpatch {

enum class phase { check = ASSETPATCH_PHASE_CHECK, download = ASSETPATCH_PHASE_DOWNLOAD, install = ASSETPATCH_PHASE_INSTALL,
                   activate = ASSETPATCH_PHASE_ACTIVATE, done = ASSETPATCH_PHASE_DONE };

struct progress {
    enum phase phase;
    std::uint64_t bytes_done, bytes_total, files_done, files_total;
    bool paused;  ///< transfers hold: the client is paused, or background work yields to foreground
    /// install: of files_done, those taken from disk (an installed release, the bundle), and
    /// their bytes with a chunked file's chunks found on disk
    std::uint64_t files_reused, bytes_reused;
};

/// Return true to cancel the update.
using progress_fn = std::function<bool(const progress&)>;
using log_fn = std::function<void(int level, std::string_view message)>;

/// What check() found: the newer release's version and the bytes an update would transfer.
struct available { std::int64_t version; std::uint64_t download_bytes; };

namespace detail {
// What one update's progress callback reaches through userdata: the caller's function and the
// exception it threw. Each update gets its own, alive and untouched until that update has
// ended, so a second call never swaps a function out from under a running update.
struct update_context {
    explicit update_context(progress_fn fn) : on_progress(std::move(fn)) {}
    const progress_fn on_progress;

    static int trampoline(const assetpatch_progress* p, void* userdata) noexcept {
        auto* self = static_cast<update_context*>(userdata);
        const progress now{static_cast<enum phase>(p->phase), p->bytes_done, p->bytes_total, p->files_done, p->files_total,
                            p->paused != 0, p->files_reused, p->bytes_reused};
#if ASSETPATCH_HPP_EXCEPTIONS
        if (self->failed()) return 1;
        try {
            return self->on_progress(now) ? 1 : 0;
        } catch (...) {
            std::lock_guard<std::mutex> lock(self->mutex_);
            self->failure_ = std::current_exception();
            return 1;
        }
#else
        return self->on_progress(now) ? 1 : 0;
#endif
    }

    assetpatch_progress_fn c_function() const { return on_progress ? &trampoline : nullptr; }

    // The exception the callback threw, once (read by the thread that collects the result).
    // Without exceptions a callback cannot throw: nothing to do.
    void rethrow() {
#if ASSETPATCH_HPP_EXCEPTIONS
        std::exception_ptr f;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            f = std::exchange(failure_, nullptr);
        }
        if (f) std::rethrow_exception(f);
#endif
    }

private:
#if ASSETPATCH_HPP_EXCEPTIONS
    bool failed() {
        std::lock_guard<std::mutex> lock(mutex_);
        return failure_ != nullptr;
    }
    std::mutex mutex_;
    std::exception_ptr failure_;
#endif
};

// A log function, for as long as the library may call it: set_log keeps every function it
// installed until the client closes, since a line being written on the updating thread may
// still be in the previous one when set_log returns.
struct log_context {
    explicit log_context(log_fn fn) : on_log(std::move(fn)) {}
    const log_fn on_log;

    static void trampoline(int level, const char* message, void* userdata) noexcept {
        auto* self = static_cast<log_context*>(userdata);
#if ASSETPATCH_HPP_EXCEPTIONS
        try {
            self->on_log(level, message ? message : "");
        } catch (...) {
            // A logger must not fail the update; the line is dropped.
        }
#else
        self->on_log(level, message ? message : "");
#endif
    }
};

}  // namespace detail

/// A transport of the host's own (assetpatch_set_transport): performs one request and reports
/// its response through assetpatch_transport_head and assetpatch_transport_body before it
/// returns; false when the transfer failed (retried like a network failure).
using transport_fn = std::function<bool(std::string_view method, std::string_view url, const std::vector<std::string>& headers,
                                        assetpatch_transport_response* response)>;

namespace detail {
struct transport_context {
    explicit transport_context(transport_fn fn) : perform(std::move(fn)) {}
    const transport_fn perform;

    static int trampoline(void* userdata, const char* method, const char* url, const char* const* headers,
                          assetpatch_transport_response* response) noexcept {
        auto* self = static_cast<transport_context*>(userdata);
        std::vector<std::string> lines;
        for (; headers && *headers; ++headers) lines.emplace_back(*headers);
#if ASSETPATCH_HPP_EXCEPTIONS
        try {
            return self->perform(method, url, lines, response) ? 0 : 1;
        } catch (...) {
            return 1;  // a transport that throws failed its transfer
        }
#else
        return self->perform(method, url, lines, response) ? 0 : 1;
#endif
    }
};

// Everything the C library reaches through userdata lives here, on the heap, so it stays put
// when the client object moves.
struct callbacks {
    std::mutex mutex;
    std::unique_ptr<update_context> background;       // the update start_update() began
    std::vector<std::unique_ptr<log_context>> logs;   // every log function installed, newest last
    std::vector<std::unique_ptr<transport_context>> transports;  // every transport set, newest last
};
}  // namespace detail

}  // namespace assetpatch

#endif  // ASSETPATCH_CALLBACKS_HPP
