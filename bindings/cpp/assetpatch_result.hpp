// assetpatch_result.hpp — what the C++ wrapper's calls return (included by assetpatch.hpp).
//
// A library call fails with a status (ASSETPATCH_ERR_*) and a message. The wrapper reports it
// two ways: the try_* calls return a result<T> (a value, or the status and message), and the
// plain calls throw assetpatch::error. A host built with -fno-exceptions gets the try_* calls
// only; the throwing ones are not declared there, so none of them can abort it.
#ifndef ASSETPATCH_RESULT_HPP
#define ASSETPATCH_RESULT_HPP

#include <assetpatch.h>

#include <cstdlib>
#include <string>
#include <utility>
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND)
#define ASSETPATCH_HPP_EXCEPTIONS 1
#include <stdexcept>
#else
#define ASSETPATCH_HPP_EXCEPTIONS 0
#endif
#include <optional>

namespace assetpatch {

#if ASSETPATCH_HPP_EXCEPTIONS
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
#endif

/// The failure of a call: its status (< 0) and the library's message.
class failure {
public:
    failure(int status, std::string message) : status_(status), message_(std::move(message)) {}
    /// The failure of the call that just returned `status` on this thread (its message is the
    /// library's last error).
    static failure last(int status) { return failure(status, assetpatch_last_error()); }
    int status() const noexcept { return status_; }
    /// The status constant's name, e.g. "ASSETPATCH_ERR_ARGUMENT".
    const char* name() const noexcept { return assetpatch_status_name(status_); }
    const std::string& message() const noexcept { return message_; }
    /// Throws this failure as an assetpatch::error; aborts in a build without exceptions.
    [[noreturn]] void raise() const {
#if ASSETPATCH_HPP_EXCEPTIONS
        throw assetpatch::error(status_, message_);
#else
        std::abort();
#endif
    }

private:
    int status_;
    std::string message_;
};

/// What a try_* call returns: its value, or why it failed. Test it before taking the value:
///
///   auto r = c.try_resolve("ui/logo.png");
///   if (!r) { log(r.error().name(), r.error().message()); return; }
///   open_image(*r);
///
/// Taking the value of a failed result throws its error (with exceptions) or aborts (without).
template <class T> class result {
public:
    result(T value) : value_(std::move(value)), failure_(0, std::string()) {}
    result(failure f) : failure_(std::move(f)) {}

    bool ok() const noexcept { return value_.has_value(); }
    explicit operator bool() const noexcept { return ok(); }
    /// The failure; status 0 and no message when the call succeeded.
    const failure& error() const noexcept { return failure_; }

    T& value() & { require(); return *value_; }
    const T& value() const& { require(); return *value_; }
    T&& value() && { require(); return std::move(*value_); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    /// The value, or `fallback` when the call failed.
    T value_or(T fallback) const& { return ok() ? *value_ : std::move(fallback); }

private:
    void require() const {
        if (!ok()) failure_.raise();
    }
    std::optional<T> value_;
    failure failure_;
};

/// What a try_* call with no value returns: success, or why it failed.
template <> class result<void> {
public:
    result() : failure_(0, std::string()) {}
    result(failure f) : failure_(std::move(f)) {}

    bool ok() const noexcept { return failure_.status() >= 0; }
    explicit operator bool() const noexcept { return ok(); }
    const failure& error() const noexcept { return failure_; }
    /// Nothing, or the failure thrown (with exceptions) or an abort (without).
    void value() const {
        if (!ok()) failure_.raise();
    }

private:
    failure failure_;
};

}  // namespace assetpatch

#endif  // ASSETPATCH_RESULT_HPP
