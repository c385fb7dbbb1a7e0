// assetpatch_events.hpp — outcome events for the C++17 wrapper (see assetpatch.h, "Outcome
// events", and docs/release-management.md, "Rollout health").
//
//   auto batch = assetpatch::read_events(c);          // JSON lines, oldest first
//   send_to_analytics(batch.lines);
//   assetpatch::ack_events(c, batch.last_seq);        // never read again
//
// Each call has a try_* form returning a result, as in assetpatch.hpp.
#ifndef ASSETPATCH_EVENTS_HPP
#define ASSETPATCH_EVENTS_HPP

#include "assetpatch.hpp"

#include <cstdint>
#include <string>

namespace assetpatch {

/// A batch of unacknowledged events: JSON lines (each ending in '\n') and the last one's seq
/// (0: none pending, lines empty).
struct event_batch {
    std::string lines;
    std::uint64_t last_seq = 0;
};

/// The oldest unacknowledged events, as many whole lines as fit in about `max_bytes` (always
/// the oldest one).
inline result<event_batch> try_read_events(const client& c, std::size_t max_bytes = 65536) {
    if (!c.handle()) return failure(ASSETPATCH_ERR_STATE, "client was moved from");
    event_batch out;
    out.lines.assign(max_bytes + 1, '\0');
    std::size_t len = 0;
    int rc = assetpatch_events_read(c.handle(), out.lines.data(), out.lines.size(), &len, &out.last_seq);
    if (rc == ASSETPATCH_ERR_RANGE) {  // the oldest event alone is larger: room for it
        out.lines.assign(len + 1, '\0');
        rc = assetpatch_events_read(c.handle(), out.lines.data(), out.lines.size(), &len, &out.last_seq);
    }
    if (auto f = detail::failed(rc)) return *f;
    out.lines.resize(len);
    return out;
}

/// Acknowledges every event up to `seq`: no read returns them again, in any process.
inline result<void> try_ack_events(client& c, std::uint64_t seq) {
    if (!c.handle()) return failure(ASSETPATCH_ERR_STATE, "client was moved from");
    if (auto f = detail::failed(assetpatch_events_ack(c.handle(), seq))) return *f;
    return {};
}

/// The outbox's counts (pending, first_seq, last_seq, acked_seq, dropped, bytes).
inline result<assetpatch_events_info> try_events_info(const client& c) {
    if (!c.handle()) return failure(ASSETPATCH_ERR_STATE, "client was moved from");
    assetpatch_events_info info = ASSETPATCH_EVENTS_INFO_INIT;
    if (auto f = detail::failed(assetpatch_events_info_get(c.handle(), &info))) return *f;
    return info;
}

#if ASSETPATCH_HPP_EXCEPTIONS
inline event_batch read_events(const client& c, std::size_t max_bytes = 65536) { return try_read_events(c, max_bytes).value(); }
inline void ack_events(client& c, std::uint64_t seq) { try_ack_events(c, seq).value(); }
inline assetpatch_events_info events_info(const client& c) { return try_events_info(c).value(); }
#endif

}  // namespace assetpatch

#endif
