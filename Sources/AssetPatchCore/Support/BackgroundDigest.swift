import Glibc

/// A sha256 taken on a thread of its own over buffers handed to it in order, so that a writer
/// that hashes what it writes (a chunked file of a gigabyte rebuilt from its chunks) reads and
/// writes the next piece while the last one is hashed, instead of one after the other. The
/// buffers come from a small pool: `buffer()` waits for a free one, so memory stays at the
/// pool's size. Without a thread (it could not be started) the hashing happens in `submit`.
final class BackgroundDigest: @unchecked Sendable {  // `free`, `queue` and `closed` are guarded by `cond`
    let bufferSize: Int
    private let cond = Condition()
    private let all: [UnsafeMutableRawBufferPointer]
    private var free: [UnsafeMutableRawBufferPointer]
    private var queue: [(buffer: UnsafeMutableRawBufferPointer, count: Int)] = []
    private var closed = false
    private let digest: Digest
    private var thread: pthread_t?

    init(buffers: Int, size: Int) throws {
        bufferSize = size
        all = (0..<max(2, buffers)).map { _ in .allocate(byteCount: size, alignment: 64) }
        free = all
        digest = try Digest(.sha256)
        thread = try? startThread { [self] in run() }
    }

    deinit {
        for b in all { b.deallocate() }
    }

    /// A free buffer of `bufferSize` bytes, to fill and `submit`.
    func buffer() -> UnsafeMutableRawBufferPointer {
        cond.locked {
            while free.isEmpty { cond.wait(until: nil) }
            return free.removeLast()
        }
    }

    /// Hashes the first `count` bytes of `buffer` after everything submitted before, then
    /// returns the buffer to the pool.
    func submit(_ buffer: UnsafeMutableRawBufferPointer, count: Int) {
        guard thread != nil else {
            digest.update(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            cond.locked { free.append(buffer) }
            return
        }
        cond.locked {
            queue.append((buffer, count))
            cond.broadcast()
        }
    }

    /// Waits until everything submitted is hashed and returns the digest (once).
    func finish() -> [UInt8] {
        stop()
        return digest.finalBytes()
    }

    /// Stops the thread once what was submitted is hashed. The owner calls it (or `finish`)
    /// before letting go: the thread keeps the object until then.
    func stop() {
        cond.locked {
            closed = true
            cond.broadcast()
        }
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    private func run() {
        while true {
            let next: (buffer: UnsafeMutableRawBufferPointer, count: Int)? = cond.locked {
                while queue.isEmpty && !closed { cond.wait(until: nil) }
                return queue.isEmpty ? nil : queue.removeFirst()
            }
            guard let next else { return }
            digest.update(UnsafeRawBufferPointer(rebasing: next.buffer[0..<next.count]))
            cond.locked {
                free.append(next.buffer)
                cond.broadcast()
            }
        }
    }
}
