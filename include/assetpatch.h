/*
 * assetpatch — hot-updatable resources for native programs.
 *
 * A program ships a read-only bundle of resources. With assetpatch it fetches newer resources
 * from a static web host (or a file:// repository) at run time: it reads a release manifest,
 * downloads the release archive (resuming interrupted downloads), verifies every byte against
 * the manifest's sha256 hashes, extracts it into a directory of its own and switches to it
 * atomically. assetpatch_resolve() then maps a resource name to a file path: the active
 * release first, the bundle second.
 *
 *     assetpatch_client *c;
 *     if (assetpatch_client_open("/var/lib/mygame/assets", "/usr/share/mygame", &c) != ASSETPATCH_OK)
 *         fprintf(stderr, "%s\n", assetpatch_last_error());
 *     assetpatch_client_set(c, "manifest_url", "https://cdn.example/mygame/head.json");
 *     int rc = assetpatch_update(c, NULL, NULL);        // ASSETPATCH_OK, _NO_UPDATE or an error
 *     char path[4096];
 *     if (assetpatch_resolve(c, "sub/sample.png", path, sizeof path, NULL) == ASSETPATCH_OK)
 *         load_image(path);
 *     assetpatch_client_close(c);
 *
 * Conventions, for every function below:
 * - Fallible functions return an int holding an assetpatch_status: 0 success, positive a
 *   non-error outcome, negative an error. Out-parameters come last.
 * - A NULL required pointer gives ASSETPATCH_ERR_ARGUMENT; no pointer argument crashes the
 *   library. Strings are NUL-terminated UTF-8; the library never keeps a caller's pointer
 *   after the call returns.
 * - After a failure, assetpatch_last_error() on the same thread says what failed and where.
 * - All functions are thread-safe. assetpatch_resolve never blocks on a running update.
 * - Structs the library fills for the caller start with `uint32_t size`. The caller sets it to
 *   the sizeof of the struct it was compiled with; the struct's _INIT macro does, and zeroes the
 *   rest. The library writes only the fields that fit in that size, never a byte past it, and
 *   leaves `size` as it was. So a host built against an older header gets the fields it knows
 *   from a newer library, and one built against a newer header gets from an older library the
 *   fields that library knows and keeps 0 in the others. A size below the struct's first
 *   version (each struct says it, and ASSETPATCH_<STRUCT>_SIZE_<VERSION> names it) is
 *   ERR_ARGUMENT.
 * - What the library does to the whole process: the first client opened calls
 *   curl_global_init (libcurl's own rule: before other threads use libcurl; a host that uses
 *   libcurl itself should call it first), registers the process for membarrier(2)'s private
 *   expedited command (what lets resolving run without a lock; where the kernel refuses it,
 *   resolving fences instead) and installs a pthread_atfork handler (a fork while a resolve's
 *   table is being replaced leaves the child a consistent one). It installs no signal handler
 *   and changes no process-wide setting beyond these.
 */
#ifndef ASSETPATCH_H
#define ASSETPATCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The release version. This header is the one place it is written: the library, CMake's
 * project version, the shared object's file name and pkg-config's Version read it from here. */
#define ASSETPATCH_VERSION_MAJOR 0
#define ASSETPATCH_VERSION_MINOR 4
#define ASSETPATCH_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, for compile-time checks. */
#define ASSETPATCH_VERSION_NUMBER (ASSETPATCH_VERSION_MAJOR * 10000 + ASSETPATCH_VERSION_MINOR * 100 + ASSETPATCH_VERSION_PATCH)
#define ASSETPATCH_VERSION_STRING "0.4.0"

#if defined(__GNUC__) || defined(__clang__)
#define ASSETPATCH_WARN_UNUSED_RESULT __attribute__((warn_unused_result))
#else
#define ASSETPATCH_WARN_UNUSED_RESULT
#endif

/* A returned pointer that is never NULL, for compilers that check it (clang: Swift imports such
 * a result as a non-optional pointer). Other pointers carry no annotation: what may be NULL is
 * said in each function's comment. */
#if defined(__clang__)
#define ASSETPATCH_NONNULL _Nonnull
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wnullability-completeness"
#else
#define ASSETPATCH_NONNULL
#endif

/* ------------------------------------------------------------------------------------------
 * Status codes
 * ---------------------------------------------------------------------------------------- */

typedef enum assetpatch_status {
    ASSETPATCH_OK               =   0,
    ASSETPATCH_NO_UPDATE        =   1,  /* already on the newest release */
    ASSETPATCH_ERR_ARGUMENT     =  -1,  /* NULL or malformed argument, unknown option or bad option value */
    ASSETPATCH_ERR_IO           =  -2,  /* filesystem error: permissions, disk full, missing directory */
    ASSETPATCH_ERR_NETWORK      =  -3,  /* connect, DNS, TLS, timeout, stalled or truncated transfer */
    ASSETPATCH_ERR_HTTP         =  -4,  /* the server answered with an unexpected HTTP status */
    ASSETPATCH_ERR_MANIFEST     =  -5,  /* manifest malformed, too large, or of an unsupported format */
    ASSETPATCH_ERR_SIGNATURE    =  -6,  /* signature missing, malformed, or not by a trusted key */
    ASSETPATCH_ERR_INTEGRITY    =  -7,  /* downloaded or extracted bytes do not match size/sha256 */
    ASSETPATCH_ERR_ARCHIVE      =  -8,  /* archive malformed or unsafe (path traversal, link, bomb) */
    ASSETPATCH_ERR_DOWNGRADE    =  -9,  /* kept for ABI stability: nothing returns it since 0.4 (an older
                                           manifest is ASSETPATCH_NO_UPDATE, see assetpatch_last_check) */
    ASSETPATCH_ERR_EXPIRED      = -10,  /* manifest past its "expires" time */
    ASSETPATCH_ERR_INCOMPATIBLE = -11,  /* release needs a newer app_version */
    ASSETPATCH_ERR_NOT_FOUND    = -12,  /* no such resource */
    ASSETPATCH_ERR_RANGE        = -13,  /* output buffer too small */
    ASSETPATCH_ERR_CANCELLED    = -14,  /* assetpatch_cancel or a progress callback stopped the update */
    ASSETPATCH_ERR_BUSY         = -15,  /* an update is already running (this process or another) */
    ASSETPATCH_ERR_STATE        = -16,  /* not valid now: no manifest_url set, no update started */
    ASSETPATCH_ERR_NOT_LOCAL    = -17,  /* the resource's group is not on disk: fetch it first
                                           (assetpatch_group_fetch; the message names the group) */
    ASSETPATCH_ERR_QUOTA        = -18,  /* group_quota_bytes can't hold the groups asked for: pinned
                                           groups and those the groups option wants leave no room */
    ASSETPATCH_ERR_METERED      = -19,  /* the network is metered (option metered) and the update or
                                           fetch plans more than metered_max_bytes: nothing was
                                           transferred beyond the head and index pages; the message
                                           gives the planned bytes. Ask the user, then allow it
                                           (raise metered_max_bytes, or set metered to 0) */
    ASSETPATCH_ERR_INTERNAL     = -99   /* a bug in the library: please report it with the message */
} assetpatch_status;
/* docs/status.md lists which failure gets which status. */

/* The constant's name for a status, e.g. "ASSETPATCH_ERR_IO"; "ASSETPATCH_UNKNOWN" for any other
 * value. Static storage: never free it. Any thread. */
const char *ASSETPATCH_NONNULL assetpatch_status_name(int status);

/* The loaded library's version, "MAJOR.MINOR.PATCH" (equal to ASSETPATCH_VERSION_STRING of the
 * header it was built with). Static storage. Any thread. */
const char *ASSETPATCH_NONNULL assetpatch_version(void);

/* A human-readable message for the last failed assetpatch call made on the calling thread,
 * e.g. "GET https://cdn.example/app/manifest.json: HTTP 503"; "" if this thread has had no
 * failure. Also covers failures without a client (assetpatch_client_open). Thread-local: the
 * pointer is owned by the library and valid until the next assetpatch call on this thread.
 * A successful call does not clear it. */
const char *ASSETPATCH_NONNULL assetpatch_last_error(void);

/* ------------------------------------------------------------------------------------------
 * Client lifecycle
 * ---------------------------------------------------------------------------------------- */

typedef struct assetpatch_client assetpatch_client;

/* Opens a client on data_dir, a writable directory the library owns (created if missing): it
 * holds the state, the installed releases and partial downloads; nothing is written elsewhere.
 * bundle_dir (may be NULL: no fallback) holds the read-only resources shipped with the app; it
 * is indexed once here. Opening finishes or discards what an interrupted update left behind
 * (never leaving a half-installed release active) and activates a release installed with
 * apply=next_open.
 * Several clients, in one process or several, may open one data_dir. Each client serves one
 * release (or the bundle only): the data_dir's active release at open, then what its own
 * update (apply=immediate), rollback or reset switches it to. Its resolve, current, plugin
 * load and list, release_get(ASSETPATCH_RELEASE_ACTIVE) and mark_good all speak of that
 * release, so code and resources never come from two releases; another client's update of
 * the data_dir reaches this one when it is opened again. A release some client serves stays
 * on disk, whatever other clients install, roll back or reset (each client holds a shared lock
 * on it, and clean-ups delete only releases they can lock exclusively); it is deleted by the
 * first clean-up after the last client serving it closes, unless it is active or kept.
 * data_dir is a trust anchor: whoever can write in it can change the releases served and the
 * plugins loaded. It and its sub-directories must belong to the user the library runs as (or
 * to root) and be writable by no one else, as OpenSSH requires of ~/.ssh; its sub-directories
 * must not be symbolic links (data_dir itself may be reached through one). Otherwise the open
 * fails with ERR_IO saying why. The library never follows a symbolic link inside data_dir: files
 * are created new (O_EXCL) and opened with O_NOFOLLOW.
 * On success *out owns a client; free it with assetpatch_client_close.
 * libcurl: the first open in a process calls curl_global_init(CURL_GLOBAL_DEFAULT), on the
 * caller's thread, and the library never calls curl_global_cleanup. libcurl counts its
 * initialisations, so a host that uses libcurl too keeps its own init and cleanup. libcurl 7.84
 * and later built thread-safe (curl_version_info() has CURL_VERSION_THREADSAFE; Debian 12's
 * 7.88 does) need nothing more. With an older libcurl, curl_global_init is not thread-safe: a
 * host that also uses libcurl calls curl_global_init itself before it starts threads, or makes
 * its first assetpatch_client_open before then. If libcurl's initialisation failed, HTTP(S)
 * transfers fail with ERR_NETWORK saying so; file:// needs no libcurl.
 * @return ASSETPATCH_OK; ERR_ARGUMENT (NULL data_dir or out); ERR_IO (data_dir not creatable or
 *         writable, another user's or writable by others, a symbolic link inside it,
 *         bundle_dir not a directory, corrupt state). */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_client_open(const char *data_dir, const char *bundle_dir, assetpatch_client **out);

/* Sets an option; values are strings, numbers in decimal. Any thread; an update already
 * running keeps the options it started with.
 *   manifest_url        https://, http:// or file:// URL of the release's head (a repository's
 *                       head.json: updates then fetch only the index pages and chunks that
 *                       changed) or of a format-1 manifest.json (required to update)
 *   public_keys         comma-separated base64 Ed25519 public keys; when set, only manifests signed
 *                       by one of them are accepted. A value that names no key ("", ",") is
 *                       ERR_ARGUMENT: verification is off only while the option is never set.
 *                       Once set, nothing accepted without verification counts: the downgrade
 *                       mark and package pin of unsigned manifests accepted earlier are ignored,
 *                       and a release installed without verification is no longer served (the
 *                       newest kept release that was verified is, or the bundle) until an update
 *                       installs a verified one
 *   package             the package this app is (the manifest's "package"). Manifests of another
 *                       package are ERR_MANIFEST and change nothing. Without it, the bundle
 *                       marker's package (see "App upgrades") pins it at open; a host that names
 *                       no package anywhere takes the first manifest's (trust on first use). A
 *                       package named here, different from the one pinned before, replaces it:
 *                       the old package's releases stop being served and its marks are dropped
 *   key_document        path of a key document the host pins (a repository's keys/N.json, shipped
 *                       in the bundle), signed by a threshold of its own root keys (else
 *                       ERR_ARGUMENT). Manifests are then judged by it, or by the newest key
 *                       document its chain leads to, instead of by public_keys (see "Key
 *                       documents" below)
 *   channel             the release channel this host follows (docs/release-management.md). A
 *                       client follows one channel: this one, else the channel of the first
 *                       manifest it accepted (kept in data_dir); a manifest naming another
 *                       channel is ERR_MANIFEST and changes nothing, so a mirror serving another
 *                       channel's signed head at this channel's URL moves nothing. Naming a
 *                       channel here is how a host moves to it, up or down, at once (the data
 *                       directory then follows it until a host names another). "" stops naming
 *                       one (the channel followed stays)
 *   rollout_id          who this client is in staged rollouts; default a random 128-bit id
 *                       created once per data_dir (its file rollout-id). A client takes a release
 *                       with a rollout iff the first 8 bytes of
 *                       sha256("<package>/<version>/<rollout_id>"), big-endian, modulo 10000
 *                       are below percent x 100; "" goes back to the default
 *   app_version         the host app's dotted version, compared with a release's min_app_version
 *                       and max_app_version: updates refuse releases outside them
 *                       (ERR_INCOMPATIBLE), and setting it stops serving installed releases
 *                       outside them (see "App upgrades" below)
 *   variants            comma-separated suffixes tried in order before the extension, e.g. "@3x,@2x,"
 *                       (an empty item is the plain name); default "" (plain name only)
 *   apply               "immediate" (default) or "next_open"
 *   groups              comma-separated on-demand groups this host wants with every update (its
 *                       language, its scale); "" (default): none. They are never evicted for
 *                       group_quota_bytes
 *   group_quota_bytes   the most the on-demand groups on disk in the served release may take
 *                       (unpacked bytes): once a fetched group is on disk, groups neither pinned
 *                       nor in groups are evicted, least recently used first; a group that
 *                       can't fit beside those is ERR_QUOTA before it is fetched; 0 or ""
 *                       (default): no quota
 *   keep_versions       earlier releases kept on disk (default 1)
 *   max_failed_launches opens of a release not marked good after which an open rolls it back
 *                       (see assetpatch_lifecycle); persisted for the data_dir; 0 (default) never
 *   connect_timeout_ms  default 10000
 *   stall_timeout_ms    abort a transfer that moves no byte for this long; default 30000
 *   low_speed_limit     abort a transfer that receives fewer bytes per second than this, averaged
 *                       over each low_speed_time_ms (a body trickling just fast enough to beat
 *                       stall_timeout_ms); retried like a stall, so a trickling server ends an
 *                       update within about 4 x low_speed_time_ms plus the retry waits; default
 *                       1024; 0: off
 *   low_speed_time_ms   the window low_speed_limit averages over; default 60000
 *   max_manifest_bytes  default 67108864 (a manifest with per-file locations takes about 230
 *                       bytes per file: 64 MiB holds some 280,000 files)
 *   max_release_bytes   total unpacked size a release may have (ERR_ARCHIVE); default 4294967296
 *   max_legacy_archive_bytes
 *                       a legacy {url, md5} manifest declares no sizes: its archive download
 *                       stops there (ERR_ARCHIVE); default 5368709120. It also stops (ERR_IO)
 *                       before it leaves less than 16 MiB or 1% of data_dir's file system free,
 *                       whichever is more, and what it wrote is dropped
 *   ca_file             PEM bundle for TLS verification (peer verification is never off)
 *   header              one extra request header "Name: value"; repeatable; "" clears
 *   user_agent          default "assetpatch/VERSION"
 *   parallel_downloads  concurrent range requests of a differential update, 1..16; default 4
 *   max_recv_speed      bytes per second all transfers of this client share (an update's parallel
 *                       ranges, a group fetch running beside it): one budget, not one per
 *                       request; changing it while a transfer runs holds from its next piece
 *                       (within well under a second); 0 (default): no cap
 *   update_priority     "foreground" or "background" (default) for updates: while foreground work
 *                       runs on data_dir (this client, another, another process), background
 *                       transfers hold (see assetpatch_pause for what a hold does) and go on
 *                       afterwards, without failing
 *   fetch_priority      the same for group fetches; default foreground
 *   metered             on: the network is metered (the host knows; the library does not guess):
 *                       an update or group fetch that plans more than metered_max_bytes is
 *                       ERR_METERED before it moves a byte beyond the head and index pages;
 *                       off (default). file:// repositories are never metered
 *   metered_max_bytes   what a transfer may plan on a metered network without asking; default 0
 *   mirrors             comma-separated URLs of the same head as manifest_url on other hosts
 *                       (a CDN and an origin, buckets in two regions), of its kind (http(s) or
 *                       file://), up to 16; "" (default): none. Every file, chunk, index page and
 *                       archive is named by its hash and checked against the signed head, so with
 *                       public_keys a mirror is an untrusted source of bytes at the same reference
 *                       relative to its head (without keys, every source is trusted as the
 *                       primary is). With a healthy primary no mirror is asked. A source that
 *                       refuses, is silent, answers an error, HTML or a wrong range, sends bytes
 *                       that fail a check, or stalls is demoted for the rest of that attempt and
 *                       its work goes on from the next, from the first file or chunk not verified.
 *                       The primary's head is taken when it is one this client takes; when the
 *                       head came from a mirror, or is older than one accepted before, the other
 *                       sources are asked and the newest head wins (no OLDER, no older release,
 *                       while a source that answers has the newer one). A large update whose rest
 *                       would take more than 8 s at the rate so far spreads its ranges over the
 *                       next sources too. header options go to manifest_url's origin only. With a
 *                       transport of the host's own (assetpatch_set_transport) the head comes from
 *                       manifest_url alone and ranges are not spread; the archive and index pages
 *                       still fail over. See docs/hosting.md
 *   head_mirrors        on (default): after the mirrors option's URLs, the hosts the newest
 *                       signature-verified head this client accepted lists (repository roots a
 *                       publisher adds with assetpatch publish --mirror, without an app update;
 *                       kept in data_dir, as this channel's head named as manifest_url names it).
 *                       Used only with public_keys or key_document; off: the host's list alone
 *   hedge_ms            a head or range request that received nothing for this long is started
 *                       on the next source too; the first to answer takes it and the silent
 *                       source is demoted: a black-holed host costs about this, not
 *                       connect_timeout_ms; default 500; 0: a source is left only when it fails
 *   events              on (default): append outcome events (checks, downloads, installs, launches,
 *                       rollbacks...) to data_dir's outbox for the host to forward (see "Outcome
 *                       events" below); off: append none. Kept in data_dir: the next open's
 *                       events follow the last value set
 *   events_max_bytes    the outbox's bound, 65536..2^30; default 1048576 (about 3000 events). When
 *                       full, acknowledged events go, then the oldest unacknowledged ones (counted
 *                       in assetpatch_events_info.dropped). Kept in data_dir like events
 *   allow_unsigned_plugins
 *                       on: plugins of releases that were not signature-verified load too
 *                       (assetpatch_plugin_load); off (default): they are refused
 *   allow_cross_origin_keys
 *                       on: key documents a manifest names may come from another origin
 *                       (scheme, host, port) than the manifest's; off (default): such a manifest
 *                       is ERR_SIGNATURE before anything is fetched from there (a forged manifest
 *                       must not send the client to hosts it names)
 *   differential        "auto" (default, or any spelling of on): differential updates whenever
 *                       they pay off (see assetpatch_update); off: always the whole archive
 *   differential_max_percent
 *                       a differential update whose ranges would transfer more than this share
 *                       of the archive downloads the whole archive instead, 1..100; default 90
 *                       (ranges were faster than the whole archive at every share measured, up
 *                       to 88%, and always move fewer bytes; near 100% the whole archive wins on
 *                       its byte-exact resume)
 *   tcp_quickack        on (default): acknowledge each response head at once (Linux
 *                       TCP_QUICKACK), which keeps servers that hold a body back until its head is
 *                       acknowledged from adding a delayed-ACK wait to every small range; off: not
 * On/off options take "1", "true", "yes", "on" for on and "0", "false", "no", "off" for off, in
 * any case; nothing else.
 * @return ASSETPATCH_OK; ERR_ARGUMENT (NULL pointer, unknown option, bad value, a manifest_url
 *         that is empty or not http/https/file). */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_client_set(assetpatch_client *c, const char *option, const char *value);

/* Cancels a running update, waits for it to stop, and frees the client. NULL does nothing.
 * Paths returned by assetpatch_resolve stay valid after close while their release is active or
 * kept; the client's hold on the release it served ends here. Call it once per client, and
 * not from the client's own progress callback. */
void assetpatch_client_close(assetpatch_client *c);

/* ------------------------------------------------------------------------------------------
 * Updating
 * ---------------------------------------------------------------------------------------- */

typedef enum assetpatch_phase {
    ASSETPATCH_PHASE_CHECK = 1,     /* fetching and verifying the manifest */
    ASSETPATCH_PHASE_DOWNLOAD = 2,  /* transferring bytes */
    ASSETPATCH_PHASE_INSTALL = 3,   /* verifying, extracting and linking files into the new release */
    ASSETPATCH_PHASE_ACTIVATE = 4,  /* switching the active release */
    ASSETPATCH_PHASE_DONE = 5
} assetpatch_phase;

typedef struct assetpatch_progress {
    int      phase;          /* an assetpatch_phase */
    uint64_t bytes_done;     /* in this phase */
    uint64_t bytes_total;    /* in this phase; 0 when unknown */
    uint64_t files_done;
    uint64_t files_total;
    int32_t  paused;         /* 1 while transfers hold (assetpatch_pause, or background work behind
                                foreground work); 0 otherwise. Since 0.5 */
    uint64_t files_reused;   /* INSTALL: of files_done, those taken from disk (an installed release,
                                the bundle) rather than from bytes this update fetched. Since 0.5 */
    uint64_t bytes_reused;   /* INSTALL: their bytes, and a chunked file's chunks found on disk. The
                                bytes fetched are DOWNLOAD's bytes_total. Since 0.5 */
} assetpatch_progress;

/* Progress callback. Runs on the updating thread, at most every 50 ms and at each phase change,
 * never two at once; phases arrive in order, DONE exactly once on success or no-update. Within a
 * phase bytes_done never decreases (except a download restarting from zero); a resumed download
 * starts at the bytes already on disk. The progress pointer is valid during the call only.
 * Return non-zero to cancel the update (it then returns ASSETPATCH_ERR_CANCELLED). It must not
 * call assetpatch_update or assetpatch_client_close on the same client. */
typedef int (*assetpatch_progress_fn)(const assetpatch_progress *progress, void *userdata);

/* Fetches and verifies the manifest only. *version and *download_bytes (each may be NULL) get
 * the newer release's version and the bytes an update would transfer from now (partial
 * downloads already on disk not counted). A legacy manifest declares no size: the archive's is
 * read from the file (file://) or a HEAD request, and 0 means the server did not tell.
 * A manifest is judged in this order: its signature (public_keys), its package (see the package
 * option), its expiry (ERR_EXPIRED, also for the version already installed: a replayed or kept
 * manifest that went stale is reported, not taken for "no update"), then the version rules.
 * Accepting a manifest pins its package (when nothing named it) and raises the downgrade mark.
 * A manifest older than the newest accepted installs nothing and is ASSETPATCH_NO_UPDATE, not an
 * error: every multi-tier CDN serves an old manifest from some edge for up to max-age times its
 * tiers, and a replay gains nothing. It is logged at level 2 with both versions, and
 * assetpatch_last_check gives the reason (ASSETPATCH_REASON_OLDER). (Up to 0.3 this was
 * ERR_DOWNGRADE.) Any thread.
 * Over HTTP(S) the last manifest fetched is kept in data_dir with its ETag or Last-Modified, and
 * the next fetch of the same URL is conditional (If-None-Match / If-Modified-Since): when nothing
 * changed it costs one 304 round trip, and the kept manifest is decoded and verified again.
 * Static servers derive both validators from the file's modification time in whole seconds, so
 * a manifest replaced within the second it was served, by one of the same size, would match
 * them. The validators are therefore kept only when the response's Last-Modified is at least one
 * second older than its Date (RFC 9110 section 8.8.2.2); an ETag without a Last-Modified is kept
 * as it is. A manifest fetched within the second it was written is kept without validators:
 * the next check fetches it in full, once.
 * @return ASSETPATCH_OK (a newer compatible release exists); ASSETPATCH_NO_UPDATE; ERR_STATE (no
 *         manifest_url); ERR_IO, ERR_NETWORK, ERR_HTTP, ERR_MANIFEST, ERR_SIGNATURE,
 *         ERR_EXPIRED, ERR_INCOMPATIBLE, ERR_ARCHIVE (release too large). */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_check(assetpatch_client *c, int64_t *version, uint64_t *download_bytes);

/* Blocking check + download + install + activate, on the calling thread. progress and userdata
 * may be NULL. On every error the active release is unchanged and still fully served, and the
 * bytes already downloaded are kept so that the next attempt, in this process or after a
 * restart, resumes. A failed update or check logs its message once at level 3 (error).
 *
 * Retries: within one call, transient failures are retried up to 3 times, waiting 250, 500 and
 * 1000 ms, a download resuming where it stopped: connection refused or reset, DNS and connect
 * timeouts, stalls (stall_timeout_ms), transfers cut before their end, HTTP 5xx, and HTTP 429
 * when it carries Retry-After. A Retry-After (on a 429 or 5xx) is waited for when it is at most
 * 30 s; a longer one fails the call at once. What a retry cannot change fails at once: more
 * than 5 redirects, a redirect to a scheme other than http(s), TLS verification, any other 4xx,
 * and bytes that do not match the manifest.
 *
 * Differential updates: when the manifest lists where each file lies in the archive (publish
 * writes it), every file whose sha256 an installed release (active, pending, kept) has is
 * hard-linked from it, a file the bundle has is copied from the bundle (its digests are cached
 * in data_dir), and only the other files are fetched: byte ranges of the archive, neighbours
 * coalesced, up to parallel_downloads requests at once over reused connections (file:// reads
 * the ranges from the archive). Each file is inflated and its sha256 checked as it arrives;
 * verified files are kept across failures and restarts and never fetched again. The whole
 * archive is downloaded instead, in the same call and without fetching the manifest again,
 * when ranges would transfer more than differential_max_percent of it, when the manifest lists
 * no locations, or when a range fails in a way a retry can't fix: a server that ignores ranges
 * (200), answers another range or an encoded one, or sends bytes that don't match the
 * manifest. The download phase's progress counts the planned bytes and files of whichever
 * path runs. A file is the unit of resuming here: a transfer cut inside a file fetches that
 * file again (a request is at most 8 MiB, or one file when a file is larger).
 *
 * Content codings: the manifest request accepts compressed codings (gzip, deflate and what
 * libcurl offers) and decodes them; max_manifest_bytes counts decoded bytes. Archive requests
 * ask for identity; a gzip or deflate answer is decoded, but such bytes are never resumed with
 * ranges, and a range answered in an encoding restarts the download from zero.
 * @return ASSETPATCH_OK (installed; activated unless apply=next_open); ASSETPATCH_NO_UPDATE;
 *         ERR_BUSY (an update runs on this client or on this data_dir in any process); ERR_STATE;
 *         ERR_CANCELLED; any error of assetpatch_check; ERR_INTEGRITY, ERR_ARCHIVE, ERR_IO. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_update(assetpatch_client *c, assetpatch_progress_fn progress, void *userdata);

/* Runs assetpatch_update on a background thread; progress is called from that thread. The
 * caller keeps userdata valid until assetpatch_update_wait has returned the result or the
 * client is closed.
 * @return ASSETPATCH_OK (started); ERR_BUSY (an update is running); ERR_ARGUMENT; ERR_INTERNAL. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_update_start(assetpatch_client *c, assetpatch_progress_fn progress, void *userdata);

/* Waits up to timeout_ms (negative: forever) for the update started by assetpatch_update_start.
 * When it has finished, *result (may be NULL) gets its status — handed out once — and, when that
 * status is an error, assetpatch_last_error() on this thread gives its message.
 * @return ASSETPATCH_OK (finished; see *result); ERR_BUSY (still running at the timeout);
 *         ERR_STATE (none started, or its result was already handed out). */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_update_wait(assetpatch_client *c, int timeout_ms, int *result);

/* Pauses every transfer of this client (updates and group fetches, running or started while
 * paused): each stops receiving at its next piece (well within a second; the server's sending is
 * held back by TCP), progress reports paused = 1, and neither stall_timeout_ms nor
 * low_speed_limit counts the pause. A pause (or a hold behind foreground work) that lasts longer
 * than 2 seconds closes the connections; assetpatch_resume then asks for each range again from
 * the byte it reached (a whole-archive download resumes from its file on disk). The blocked
 * call keeps blocking meanwhile; assetpatch_cancel still stops it. Any thread. */
void assetpatch_pause(assetpatch_client *c);

/* Lets paused transfers go on. Any thread. */
void assetpatch_resume(assetpatch_client *c);

/* Asks a running update to stop soon (within about 100 ms, also during a stalled transfer); it
 * then returns ASSETPATCH_ERR_CANCELLED, keeping downloaded bytes. Does nothing when no update
 * runs, or for NULL. Any thread, also from a signal-free progress callback. */
void assetpatch_cancel(assetpatch_client *c);

/* Why a check or update found nothing to install. */
typedef enum assetpatch_no_update_reason {
    ASSETPATCH_REASON_CURRENT = 1,      /* the manifest offers the release installed (active, or pending) */
    ASSETPATCH_REASON_OLDER = 2,        /* the manifest is older than one accepted before (a lower
                                           version, or the same version signed before, e.g. before a
                                           halt): a cache still serving an old manifest, or a replay;
                                           nothing older installs */
    ASSETPATCH_REASON_BAD_VERSION = 3,  /* the manifest offers a version this client rolled back from */
    ASSETPATCH_REASON_IN_BUNDLE = 4,    /* the app's bundle carries that release or a newer one */
    ASSETPATCH_REASON_NOT_IN_ROLLOUT = 5,
                                        /* the manifest's staged rollout does not include this client
                                           (yet), or is halted (0%): see "Channels and rollouts" */
    ASSETPATCH_REASON_CHANNEL_BEHIND = 6
                                        /* not given since 0.5 (0.4 gave it for a manifest of a
                                           channel behind the one installed): a client follows one
                                           channel and moves, up or down, when the host names
                                           another (option channel) */
} assetpatch_no_update_reason;

/* What the last assetpatch_check or assetpatch_update of a client found. The caller sets `size`
 * (ASSETPATCH_CHECK_OUTCOME_INIT does) and the library writes no byte past it, so a host built
 * against this header keeps working with a newer library whose struct has grown, and one built
 * against a newer header gets the fields this library knows (the rest keep their initial 0). */
typedef struct assetpatch_check_outcome {
    uint32_t size;              /* set by the caller: sizeof(assetpatch_check_outcome) */
    int32_t  status;            /* that call's status: ASSETPATCH_OK, ASSETPATCH_NO_UPDATE or an error */
    int32_t  reason;            /* an assetpatch_no_update_reason when status is ASSETPATCH_NO_UPDATE, else 0 */
    int32_t  reserved;          /* 0 */
    int64_t  manifest_version;  /* the version the manifest offered; 0 when none was read, or a legacy manifest */
    int64_t  accepted_version;  /* the highest version accepted before that call from the manifest's
                                   channel (the downgrade mark in force) */
    /* Since 0.4 (104 bytes): */
    int32_t  rollout_basis_points; /* the manifest's rollout share in force, in 1/100 % (0..10000);
                                      -1 when it has no rollout (offered to every client) */
    int32_t  rollout_bucket;    /* this client's bucket for that release, 0..9999 (it takes the release
                                   iff bucket < rollout_basis_points); -1 when not computed */
    char     channel[64];       /* the manifest's channel ("stable" when it names none); "" when no
                                   manifest was read */
    /* Since 0.5 (112 bytes): */
    int32_t  source;            /* whose head it took: 0 manifest_url, else its index among the
                                   sources (assetpatch_source_at); -1 when it took none */
    int32_t  reserved2;         /* 0 */
} assetpatch_check_outcome;

#define ASSETPATCH_CHECK_OUTCOME_INIT { sizeof(assetpatch_check_outcome), 0, 0, 0, 0, 0, 0, 0, "", 0, 0 }
/* The struct's size in each version: the library accepts any size from the first. */
#define ASSETPATCH_CHECK_OUTCOME_SIZE_0_4_0 32
#define ASSETPATCH_CHECK_OUTCOME_SIZE_0_4 104
#define ASSETPATCH_CHECK_OUTCOME_SIZE_0_5 112

/* Fills *out with what the last check or update of `c` found: whether there was something to
 * install and, when there was not, why (a host can tell a stale cache edge from "up to date"
 * without reading the log). Any thread.
 * @return ASSETPATCH_OK; ERR_STATE (no check or update has run on this client); ERR_ARGUMENT
 *         (NULL c or out, out->size smaller than the first version of the struct,
 *         ASSETPATCH_CHECK_OUTCOME_SIZE_0_4_0). */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_last_check(assetpatch_client *c, assetpatch_check_outcome *out);

/* Each source of the repository as the last check or update of this client left it: index 0 is
 * manifest_url, then the mirrors option's URLs in order (one equal to another, or of another
 * kind than manifest_url, left out), then those the head_mirrors option adds (see the mirrors
 * option and docs/hosting.md). */
typedef struct assetpatch_source_info {
    uint32_t size;           /* set by the caller: sizeof(assetpatch_source_info); first version 800 */
    int32_t  demoted;        /* 1 when that check or update took it out of its work (it failed, was
                                silent, or served an older head than another source) */
    int32_t  served_head;    /* 1 when that check or update took its head */
    int32_t  reserved;       /* 0 */
    uint64_t requests;       /* requests sent to it */
    uint64_t bytes;          /* body bytes it delivered */
    char     url[512];       /* its head's URL without credentials or query (NUL-terminated; a
                                longer one is cut at a character boundary); the head a manifest.json
                                names when that was read in its place */
    char     last[256];      /* its last result: "served the head (HTTP 200)", "served N bytes",
                                "not asked", or its failure's message (cut the same way) */
} assetpatch_source_info;

#define ASSETPATCH_SOURCE_INFO_INIT { sizeof(assetpatch_source_info), 0, 0, 0, 0, 0, "", "" }
#define ASSETPATCH_SOURCE_INFO_SIZE_0_5 800

/* *count gets the number of sources the last check or update used; 0 when it had manifest_url
 * alone, or before the first. From memory. Any thread.
 * @return ASSETPATCH_OK; ERR_ARGUMENT (NULL c or count). */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_source_count(assetpatch_client *c, size_t *count);

/* Fills *out for source number `index` (0: manifest_url; 1 to count - 1: the other sources, in
 * the order above) as the last check or update left it. From memory. Any thread.
 * @return ASSETPATCH_OK; ERR_NOT_FOUND (index past the sources); ERR_ARGUMENT (NULL c or out,
 *         out->size below the first version). */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_source_at(assetpatch_client *c, size_t index, assetpatch_source_info *out);

/* ------------------------------------------------------------------------------------------
 * Resolving resources
 * ---------------------------------------------------------------------------------------- */

/* Maps a resource name ("sub/sample.png") to an absolute file path. For each suffix of the
 * variants option in order, the active release is searched first, then bundle_dir; the first
 * file found wins. The suffix goes before the last '.' of the last component, or at the end when
 * that component has no '.' after its first character ("a.tar.gz" -> "a.tar@2x.gz", "README" ->
 * "README@2x"). Answers from a table resolved ahead for the variants (rebuilt off the lookup
 * path when the variants or the active release change): one hash probe per call whatever the
 * variants, no lock, no atomic read-modify-write, no system call, never blocks on a running
 * update (the table is swapped read-copy-update style: an update waits for lookups in flight,
 * lookups never wait). Any thread.
 * The path (NUL-terminated) is written to path; *path_len (may be NULL) gets its length without
 * the NUL, also when path_cap is too small. path == NULL with path_cap == 0 is a size query.
 * A returned path stays valid while this client serves its release, and after that while the
 * release is active or kept (keep_versions).
 * A name whose file is in an on-demand group not on disk is ERR_NOT_LOCAL (the message names
 * the group): never an older release's copy, whatever the variants, nor the bundle's unless it
 * has the file's sha256 (hashed by the update, its fingerprint checked at each open).
 * @return ASSETPATCH_OK; ERR_NOT_FOUND; ERR_NOT_LOCAL; ERR_RANGE (path_cap too small, size query);
 *         ERR_ARGUMENT (NULL c or name; empty name, name starting with '/', containing '\\', or
 *         with an empty, "." or ".." component, or a component longer than 255 bytes). */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_resolve(assetpatch_client *c, const char *name, char *path, size_t path_cap, size_t *path_len);

/* As assetpatch_resolve, and *variant (may be NULL) gets the index, in the variants option, of
 * the suffix that matched (with "@3x,@2x,": 0 for @3x, 1 for @2x, 2 for the plain name), so the
 * host knows the scale of what it loads. Set on ASSETPATCH_OK and ERR_RANGE. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_resolve_variant(assetpatch_client *c, const char *name, char *path, size_t path_cap, size_t *path_len,
                               int *variant);

/* ------------------------------------------------------------------------------------------
 * Groups: content on demand (docs/groups.md)
 *
 * A publisher may put files in named groups (`assetpatch publish --group NAME=PATTERN`): an
 * "install" group comes with every update, an "on_demand" group only when the host fetches it
 * (a level, a language, a scale of art). Files in no group are the release's base. An update
 * installs the base, the install groups, the on-demand groups in the groups option and those
 * the active release has on disk (fetched, or at least half its bytes at the same paths: a
 * release before groups, a renamed group; moved forward: only their changed files and chunks
 * travel);
 * assetpatch_check plans exactly these bytes. Groups need a format-2 head (head.json).
 * ---------------------------------------------------------------------------------------- */

typedef enum assetpatch_group_state {
    ASSETPATCH_GROUP_ABSENT = 0,   /* not on disk: resolving its files gives ERR_NOT_LOCAL */
    ASSETPATCH_GROUP_PARTIAL = 1,  /* a fetch by this client is under way */
    ASSETPATCH_GROUP_LOCAL = 2     /* on disk, verified and durable: its files resolve */
} assetpatch_group_state;

typedef enum assetpatch_group_delivery {
    ASSETPATCH_GROUP_INSTALL = 0,   /* installed with every update */
    ASSETPATCH_GROUP_ON_DEMAND = 1  /* fetched when the host asks (assetpatch_group_fetch) */
} assetpatch_group_delivery;

/* One group of the release this client serves. */
typedef struct assetpatch_group_info {
    uint32_t size;           /* set by the caller: sizeof(assetpatch_group_info); first version 120 */
    int32_t  state;          /* assetpatch_group_state */
    int32_t  delivery;       /* assetpatch_group_delivery */
    int32_t  pinned;         /* 1 when pinned (assetpatch_group_pin) */
    uint64_t files;          /* files in the group */
    uint64_t total_bytes;    /* their unpacked bytes */
    uint64_t local_bytes;    /* of those, the bytes on disk (total_bytes when local, else 0) */
    uint64_t archive_bytes;  /* their bytes in the release's archive */
    uint64_t fetch_bytes;    /* what assetpatch_group_fetch would transfer (0 when local), as the
                                update that installed the release planned it: its files not on
                                disk (kept releases, this release, the bundle at any path) by
                                range, plus nothing for those; a chunked file counts whole, so a
                                fetch that finds some of its chunks on disk transfers less (plus
                                the group's chunk-list pages). archive_bytes for a release
                                installed before this field. */
    char     name[64];       /* NUL-terminated */
} assetpatch_group_info;

#define ASSETPATCH_GROUP_INFO_INIT { sizeof(assetpatch_group_info), 0, 0, 0, 0, 0, 0, 0, 0, "" }
#define ASSETPATCH_GROUP_INFO_SIZE_0_5 120

/* *count gets the number of groups of the release this client serves (0 for the bundle).
 * From memory. Any thread.
 * @return ASSETPATCH_OK; ERR_ARGUMENT (NULL c or count). */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_group_count(assetpatch_client *c, size_t *count);

/* Fills *out for group number `index` (0 to count - 1, the release's order) of the release this
 * client serves. From memory. Any thread.
 * @return ASSETPATCH_OK; ERR_NOT_FOUND (index past the groups); ERR_ARGUMENT (NULL c or out,
 *         out->size below the first version). */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_group_at(assetpatch_client *c, size_t index, assetpatch_group_info *out);

/* Fills *out for group `name` of the release this client serves: answered from memory, without
 * a system call or a lock held by anything but a swap of what resolving reads (well under a
 * microsecond at 100,000 files). A group another process fetched shows as local once this
 * client fetches it too (which then transfers nothing) or opens again. Any thread.
 * @return ASSETPATCH_OK; ERR_NOT_FOUND (no such group); ERR_ARGUMENT. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_group_status(assetpatch_client *c, const char *name, assetpatch_group_info *out);

/* Fetches the on-demand groups `names` (a NULL-terminated array) of the release this client
 * serves, from that release's own archive (never bytes of a newer release): files and chunks
 * already on disk (installed releases, the bundle, an interrupted fetch) are not fetched again,
 * the rest arrives by range requests and is checked against the signed sha256 of every file and
 * chunk; the group is made durable, then resolves. Install groups and groups on disk return at
 * once (a group fetched by another process is taken as it is). A killed or cancelled fetch
 * resumes where it stopped. Blocks; progress as for assetpatch_update (phases download and
 * install); assetpatch_cancel stops it (ERR_CANCELLED, keeping what arrived). Resolving goes on
 * meanwhile, and so may an update by this or another client: one that lands mid-fetch leaves the
 * fetch to complete into the release this client serves; a client serving the new release
 * fetches the group there (files unchanged since are linked, not transferred). One fetch of a
 * group at a time per data_dir: a second waits for the first. With group_quota_bytes, a group
 * that can't fit beside the pinned and wanted ones is ERR_QUOTA before any byte moves; once it
 * is on disk, groups neither pinned nor in the groups option are evicted, least recently used
 * first (a fetch uses a group), so a fetch that fails evicts nothing and the disk holds at most
 * the quota plus the group in flight. Any thread.
 * @return ASSETPATCH_OK; ERR_NOT_FOUND (no such group, or only the bundle is served); ERR_QUOTA;
 *         ERR_STATE (the release was installed without its archive's location: before 0.5);
 *         ERR_NETWORK, ERR_HTTP (also a host that does not answer ranges as asked),
 *         ERR_INTEGRITY, ERR_IO, ERR_CANCELLED; ERR_ARGUMENT. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_group_fetch(assetpatch_client *c, const char *const *names, assetpatch_progress_fn progress, void *userdata);

/* Evicts on-demand group `name` of the release this client serves: this client stops
 * resolving its files (ERR_NOT_LOCAL) and its files are deleted, unless another client serves
 * files from it: they stay until that client closes and go at a later clean-up. Paths this
 * client handed out from the group stop being valid. A fetch of the group under way (any
 * process) is waited for; assetpatch_cancel stops the wait. Any thread.
 * @return ASSETPATCH_OK (also when it was not on disk); ERR_NOT_FOUND; ERR_ARGUMENT (an install
 *         group, NULL c or name); ERR_CANCELLED; ERR_IO. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_group_evict(assetpatch_client *c, const char *name);

/* Pins (on != 0) or unpins group `name`: a pinned group is never evicted to make room under
 * group_quota_bytes. Pins are kept in data_dir by name, for every release. Any thread.
 * @return ASSETPATCH_OK; ERR_NOT_FOUND; ERR_IO; ERR_ARGUMENT. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_group_pin(assetpatch_client *c, const char *name, int on);

/* ------------------------------------------------------------------------------------------
 * Releases
 * ---------------------------------------------------------------------------------------- */

/* *version gets the active release's version, 0 when only the bundle is served. Any thread.
 * @return ASSETPATCH_OK; ERR_ARGUMENT (NULL c or version). */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_current(assetpatch_client *c, int64_t *version);

/* Confirms the release this client serves (the data_dir's active one, unless another client
 * has installed another since this one opened): it stops counting towards max_failed_launches
 * and is never rolled back automatically. Call it once the app has run well on the release
 * (e.g. after its first screen). Any thread.
 * @return ASSETPATCH_OK; ERR_STATE (only the bundle is served, or the release served is no
 *         longer installed: another client replaced it); ERR_IO; ERR_ARGUMENT. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_mark_good(assetpatch_client *c);

/* Goes back to the newest kept release, or to the bundle when none is kept, and serves it at
 * once. The version rolled back from is remembered as bad: updates skip it until a newer
 * version is published. Rolling back again goes one kept release further. The files of the
 * release rolled back from stay on disk until the next assetpatch_client_open, so paths already
 * handed out from it keep working in this session. Any thread.
 * @return ASSETPATCH_OK; ERR_STATE (only the bundle is served); ERR_IO; ERR_ARGUMENT. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_rollback(assetpatch_client *c);

/* Drops every release (active, kept, pending), every partial download and the bad-version
 * list, and serves the bundle only; paths handed out from releases stop being valid. The
 * highest accepted manifest version and the pinned package stay, so a reset does not let an
 * older manifest back in; the next update installs the newest release. (A package named by the
 * host replaces a pin taken from a manifest: see the package option.)
 * @return ASSETPATCH_OK; ERR_BUSY (an update runs on this data_dir); ERR_IO; ERR_ARGUMENT. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_reset(assetpatch_client *c);

/* App upgrades: an app-store upgrade must not be shadowed by a hot update built for the old app.
 * - A bundle may carry assetpatch-bundle.json, {"package": NAME, "version": N} (written by
 *   `assetpatch stamp-bundle`): it ships release N. assetpatch_client_open then stops serving
 *   installed releases up to N (the active one gives way to the bundle) and updates install only
 *   releases newer than N. The marker's package is the app's package: it is pinned before any
 *   manifest is seen, replacing another pinned before (whose releases stop being served); only
 *   the package option ranks above it, and then the marker's version is ignored (logged).
 * - Setting app_version stops serving installed releases whose min_app_version/max_app_version
 *   exclude it: the active one gives way to the newest kept release that fits, or the bundle.
 * Neither marks a version bad. The reason is recorded (assetpatch_lifecycle_get) and logged at
 * level 2; an open also logs, at level 1, that the bundle changed since the last open. */

/* Channels and rollouts (docs/release-management.md): a repository offers one manifest per
 * channel ("stable", its top-level manifest.json/head.json, and channels/NAME/ for others);
 * versions are one sequence across channels. Downgrade marks are kept per channel, so a replayed
 * older manifest of a channel stays ASSETPATCH_REASON_OLDER. A client follows one channel (see
 * the option channel): a manifest of another is ERR_MANIFEST, and a host moves to another
 * channel, up or down, by naming it. A manifest may carry a staged rollout: a client outside
 * it (see the option rollout_id) gets ASSETPATCH_NO_UPDATE with ASSETPATCH_REASON_NOT_IN_ROLLOUT,
 * and assetpatch_last_check reports the share and its bucket. A halted rollout (0%) installs on
 * no new client; clients that installed the release keep it.
 *
 * Key documents: with public_keys (or key_document) set, a manifest may name a key document
 * ("keys": {"version": N, "url": "keys/"}): the client then fetches documents it has not seen,
 * up to N, each signed by a threshold of the previous document's root keys (the pinned keys
 * for the first) and of its own, keeps the newest in data_dir, and requires a threshold of its
 * signing keys' signatures on every manifest from then on (ERR_SIGNATURE otherwise; a newest
 * document past its expiry is ERR_EXPIRED). A manifest naming no document, or an older one, is
 * judged by the newest document kept (kept per trust anchor: clients of one data_dir pinning
 * different keys each keep their own). Documents come from the manifest's origin (see
 * allow_cross_origin_keys; their requests follow no redirect), only once the envelope could
 * carry a valid signature, and a document followed is kept only once its manifest is accepted.
 * Every manifest is judged with what was accepted before by the signing keys in force: a release
 * or a downgrade mark that only keys since retired vouched for (a release installed with a stolen
 * key) stops counting, so the newest kept release still vouched for is served (or the bundle)
 * and the publisher's recovery release installs; an installed release the current keys sign
 * again for this client (a channel re-signed after a rotation) counts on, without a download
 * (releases installed before 0.5, whose signers were not recorded: see
 * docs/release-management.md).
 * Manifests are ordered: the version, then the channel's "revision", which every signing of a
 * channel raises. Every manifest seen raises its channel's mark, also one this client is outside
 * the rollout of, so a manifest signed before a halt (from a cache, a mirror, or a 304 naming an
 * earlier copy) is ASSETPATCH_REASON_OLDER once the halt was seen. */

/* Which release assetpatch_release_get describes. */
typedef enum assetpatch_release_which {
    ASSETPATCH_RELEASE_ACTIVE = 1,    /* the release served now */
    ASSETPATCH_RELEASE_PENDING = 2,   /* installed with apply=next_open, served after the next open */
    ASSETPATCH_RELEASE_CANDIDATE = 3  /* the newer release the last successful assetpatch_check found */
} assetpatch_release_which;

/* What an app may show about a release ("what's new") and use to decide when to call
 * assetpatch_mark_good or whether to insist on an update. */
typedef struct assetpatch_release_info {
    uint32_t size;              /* set by the caller: sizeof(assetpatch_release_info); first version 296 */
    uint32_t reserved;          /* 0 */
    int64_t version;
    int64_t created;            /* Unix seconds, from the manifest's "created"; 0 when absent */
    int32_t signature_verified; /* 1 when public_keys was set and the manifest's signature checked */
    int32_t marked_good;        /* 1 when confirmed with assetpatch_mark_good (never for a candidate) */
    int32_t mandatory;          /* 1 when the manifest says "mandatory": the publisher asks apps to install it */
    int32_t has_notes;          /* 1 when the manifest has "notes" (read them with assetpatch_release_notes) */
    char    label[256];         /* the manifest's "label", NUL-terminated, may be truncated; "" when absent */
    /* Since 0.4 (368 bytes): */
    char    channel[64];        /* the channel the release came from ("stable" when its manifest named none) */
    int32_t rollout_basis_points; /* its manifest's rollout share, in 1/100 %: for a candidate the share in
                                     force at the check, for an installed release the share when it was
                                     installed; -1 when the manifest had no rollout */
    int32_t reserved2;          /* 0 */
} assetpatch_release_info;

#define ASSETPATCH_RELEASE_INFO_INIT { sizeof(assetpatch_release_info), 0, 0, 0, 0, 0, 0, 0, "", "", 0, 0 }
#define ASSETPATCH_RELEASE_INFO_SIZE_0_4_0 296   /* the first version */
#define ASSETPATCH_RELEASE_INFO_SIZE_0_4 368

/* Fills *out for the release `which` names. Any thread.
 * @return ASSETPATCH_OK; ERR_NOT_FOUND (no such release: bundle only, nothing pending, or no
 *         check has found a newer release); ERR_ARGUMENT (NULL c or out, unknown which); ERR_IO. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_release_get(assetpatch_client *c, int which, assetpatch_release_info *out);

/* Writes the release's "notes" (UTF-8, at most 65536 bytes, NUL-terminated) into buf, as
 * assetpatch_resolve writes paths: *len (if non-NULL) gets their length without the NUL even
 * when cap is too small. A release without notes gives "".
 * @return ASSETPATCH_OK; ERR_RANGE (cap too small; *len set); ERR_NOT_FOUND; ERR_ARGUMENT; ERR_IO. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_release_notes(assetpatch_client *c, int which, char *buf, size_t cap, size_t *len);

/* Bytes data_dir uses: *releases (installed releases; a file hard-linked into several counts
 * once) and *downloads (partial archives, files fetched by an interrupted differential update,
 * a release being installed). Either may be NULL. Partial downloads of superseded releases are
 * removed when an update succeeds, releases beyond keep_versions when a release is activated.
 * Before downloading, an update checks the filesystem's free space (statvfs) for what it will
 * write plus a margin (2% and 4 MiB) and fails at once with ERR_IO, giving the numbers, when it
 * lacks room. Any thread; walks the directory (milliseconds per thousand files).
 * @return ASSETPATCH_OK; ERR_ARGUMENT (NULL c). */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_disk_usage(assetpatch_client *c, uint64_t *releases, uint64_t *downloads);

/* Crash-loop rollback (option max_failed_launches): activation sets a launch count to 0. Each
 * assetpatch_client_open that finds the active release not marked good adds 1 (the session
 * that activated with apply=immediate does not count; the open that activates an
 * apply=next_open release counts as 1). When the count exceeds max_failed_launches, that open
 * rolls back (as assetpatch_rollback) before returning, records why, and logs it at level 2 to
 * the first log callback set on the client. Counting is safe with any number of processes
 * opening one data_dir at once. The value in force is the last one set by any client of the
 * data_dir (it is persisted): with 2, the first two opens keep the release, the third rolls it
 * back. */
typedef struct assetpatch_lifecycle {
    uint32_t size;                /* set by the caller: sizeof(assetpatch_lifecycle); first version 320 */
    uint32_t reserved;            /* 0 */
    int64_t  active_version;      /* 0: only the bundle is served */
    int64_t  pending_version;     /* installed with apply=next_open, activated by the next open; 0: none */
    int32_t  active_marked_good;  /* 1 when assetpatch_mark_good confirmed the active release */
    uint32_t launches;            /* opens of the active release since activation without mark_good */
    uint32_t max_failed_launches; /* in force for this data_dir; 0: never roll back automatically */
    uint32_t bad_versions;        /* versions rolled back from, skipped by updates */
    int64_t  rolled_back_from;    /* the last rollback left this version; 0: none happened */
    int64_t  rolled_back_to;      /* ... and went to this one (0: the bundle) */
    int64_t  rolled_back_at;      /* ... at this time, Unix seconds */
    char     rollback_reason[256];/* ... because of this (NUL-terminated, may be truncated) */
} assetpatch_lifecycle;

#define ASSETPATCH_LIFECYCLE_INIT { sizeof(assetpatch_lifecycle), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "" }
#define ASSETPATCH_LIFECYCLE_SIZE_0_4_0 320      /* the first version */

/* Fills *out with the data_dir's lifecycle state, read now (another process may have changed
 * it since this client opened). Any thread.
 * @return ASSETPATCH_OK; ERR_ARGUMENT (NULL c or out); ERR_IO. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_lifecycle_get(assetpatch_client *c, assetpatch_lifecycle *out);

/* ------------------------------------------------------------------------------------------
 * Plugins: shared objects shipped in a release
 * ---------------------------------------------------------------------------------------- */

/* Loads plugin `name`, declared in the active release's manifest, and writes the address of
 * `symbol` (NULL: the plugin's declared entry) to *address. Any thread.
 * - Only plugins of a release whose manifest was signature-verified (public_keys set and the
 *   signature checked) load, unless the option allow_unsigned_plugins is "1".
 * - The bytes mapped are exactly the verified bytes: the installed file is copied into a sealed
 *   anonymous file (memfd) while its sha256 is computed, and loaded from there only when digest
 *   and size match what was installed and its ELF header is a shared object for this machine.
 *   A file changed, swapped or truncated on disk is ERR_INTEGRITY, never a crash.
 * - Loading the same plugin of the same release again returns the same code; a newer release's
 *   plugin (or, after a rollback, the kept release's) is a new load, so its code runs. Code
 *   already loaded stays loaded until the process exits: pointers obtained before an update or a
 *   rollback keep working, and the host decides when to switch to the new ones.
 * - A plugin's own dependencies must be found by the system's search path or already be loaded
 *   by the host: it is mapped from an anonymous file, so $ORIGIN in its rpath does not name the
 *   release directory. The sysctl vm.memfd_noexec (Linux 6.3 and later) does not stop plugins:
 *   it governs execve of anonymous files, and a plugin is mapped with mmap, which it leaves
 *   alone (plugins load with it at 0, 1 and 2, checked on Linux 6.18 in a pid namespace of
 *   each setting). A security policy that forbids executable mappings of anonymous files
 *   (SELinux's execute permission on them, for one) makes dlopen fail: ERR_ARCHIVE with
 *   dlerror's text.
 * @return ASSETPATCH_OK; ERR_NOT_FOUND (bundle only, unknown plugin or symbol); ERR_NOT_LOCAL
 *         (its file is in an on-demand group not on disk); ERR_SIGNATURE
 *         (unsigned release); ERR_INTEGRITY (the file changed on disk since install);
 *         ERR_ARCHIVE (another machine's code, or dlopen failed, e.g. a missing dependency:
 *         dlerror's text is in the message); ERR_ARGUMENT; ERR_IO. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_plugin_load(assetpatch_client *c, const char *name, const char *symbol, void **address);

typedef struct assetpatch_plugin_info {
    uint32_t size;     /* set by the caller: sizeof(assetpatch_plugin_info); first version 392 */
    uint32_t reserved; /* 0 */
    char name[128];
    char version[64];  /* the plugin's own version; "" when the manifest gives none */
    char entry[128];   /* the entry symbol */
    char abi[64];      /* an ABI tag the host checks; "" when the manifest gives none */
} assetpatch_plugin_info;

#define ASSETPATCH_PLUGIN_INFO_INIT { sizeof(assetpatch_plugin_info), 0, "", "", "", "" }
#define ASSETPATCH_PLUGIN_INFO_SIZE_0_4_0 392    /* the first version */

/* The active release's plugins: *count (may be NULL) gets how many there are; with out non-NULL,
 * the first min(cap, count) are written to out[]. The elements are out[0].size bytes apart: set
 * it (ASSETPATCH_PLUGIN_INFO_INIT in each element, or out[0].size = sizeof *out); each element
 * written gets that size. Any thread.
 * @return ASSETPATCH_OK; ERR_ARGUMENT (NULL c; out[0].size below the first version); ERR_IO. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_plugin_list(assetpatch_client *c, assetpatch_plugin_info *out, size_t cap, size_t *count);

/* ------------------------------------------------------------------------------------------
 * Logging
 * ---------------------------------------------------------------------------------------- */

/* Log callback: level 0 debug, 1 info, 2 warning, 3 error. message is valid during the call. */
typedef void (*assetpatch_log_fn)(int level, const char *message, void *userdata);

/* Routes the client's log lines to fn (NULL turns logging off). fn may be called from the
 * thread running an update; it must not call back into this client.
 * @return ASSETPATCH_OK; ERR_ARGUMENT (NULL c). */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_set_log(assetpatch_client *c, assetpatch_log_fn fn, void *userdata);

/* ------------------------------------------------------------------------------------------
 * Outcome events (docs/release-management.md, "Rollout health")
 * ---------------------------------------------------------------------------------------- */

/* Every client appends outcome events to its data_dir's outbox (option events): check,
 * download, install, activate, launch, marked_good, rollback (with its cause: crash_loop, host,
 * app_upgrade), plugin_load_failed, group_fetch. Each is one JSON object with a per-data_dir
 * sequence number ("seq", from 1, never reused within its "stream"), the time, the package,
 * channel, release version, app_version, a device id (a hash of the data_dir's own random id) and
 * the kind's own fields; the reference lists them all. The outbox is shared by every process on data_dir and survives
 * kills and power cuts: an event appended is read until it is acknowledged, and never after.
 * A crash-loop rollback is appended by the open that rolls back, so the next session forwards
 * it. Forward them to your analytics: read a batch, send it, then acknowledge up to its last
 * seq (a crash between send and acknowledge sends the batch again: deduplicate by device,
 * stream and seq). */

/* Writes the oldest unacknowledged events into buf as JSON lines (each ending in '\n'), as many
 * whole lines as fit in cap bytes with a NUL after them, oldest first. *len (may be NULL) gets
 * the bytes written without the NUL; *last_seq (may be NULL) the seq of the last event written,
 * 0 when none is pending (then buf is ""). When even the first event does not fit, ERR_RANGE
 * and *len is the cap it needs minus one. Any thread.
 * @return ASSETPATCH_OK; ERR_RANGE; ERR_ARGUMENT (NULL c or buf); ERR_IO. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_events_read(assetpatch_client *c, char *buf, size_t cap, size_t *len, uint64_t *last_seq);

/* Acknowledges every event up to seq: no read returns them again, in any process, also after a
 * crash (the acknowledgement is durable when this returns). An acknowledgement at or below an
 * earlier one does nothing. Any thread.
 * @return ASSETPATCH_OK; ERR_ARGUMENT (NULL c; seq past the newest event); ERR_IO. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_events_ack(assetpatch_client *c, uint64_t seq);

typedef struct assetpatch_events_info {
    uint32_t size;        /* set by the caller: sizeof(assetpatch_events_info); first version 56 */
    uint32_t reserved;    /* 0 */
    uint64_t pending;     /* events not acknowledged */
    uint64_t first_seq;   /* the oldest of them; 0: none */
    uint64_t last_seq;    /* the newest of them; 0: none */
    uint64_t acked_seq;   /* everything up to this was acknowledged */
    uint64_t dropped;     /* unacknowledged events dropped to keep the outbox within events_max_bytes */
    uint64_t bytes;       /* the outbox's size on disk */
} assetpatch_events_info;

#define ASSETPATCH_EVENTS_INFO_INIT { sizeof(assetpatch_events_info), 0, 0, 0, 0, 0, 0, 0 }
#define ASSETPATCH_EVENTS_INFO_SIZE_0_5 56      /* the first version */

/* Fills *out with the outbox's counts, read now. Any thread.
 * @return ASSETPATCH_OK; ERR_ARGUMENT (NULL c or out; out->size below the first version); ERR_IO. */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_events_info_get(assetpatch_client *c, assetpatch_events_info *out);

/* Live events: fn gets each event's JSON (one line, no newline; valid during the call) as this
 * client appends it, on the thread that appended it, after it is in the outbox. Events appended
 * before fn was set (the open's launches and rollbacks) or by other processes are read with
 * assetpatch_events_read. fn must not call back into this client. NULL: none; a call already
 * under way on another thread (an update's) may still finish after this returns, so keep
 * userdata alive until no update or group fetch of this client runs.
 * @return ASSETPATCH_OK; ERR_ARGUMENT (NULL c). */
typedef void (*assetpatch_event_fn)(const char *json, size_t len, void *userdata);
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_set_event_callback(assetpatch_client *c, assetpatch_event_fn fn, void *userdata);

/* ------------------------------------------------------------------------------------------
 * A transport of the host's own (docs/transfers.md)
 * ---------------------------------------------------------------------------------------- */

/* Where a host transport reports one response; valid during that perform call only. */
typedef struct assetpatch_transport_response assetpatch_transport_response;

/* A transport the host supplies in place of libcurl: the platform's own HTTP stack performs each
 * request. Everything above it works unchanged: ranges, resume, verification, validators,
 * retries, max_recv_speed and pauses (applied as body bytes are handed over). */
typedef struct assetpatch_transport {
    uint32_t size;  /* set by the caller: sizeof(assetpatch_transport); first version 24 */
    /* Performs one request: method "GET" or "HEAD"; url http(s); headers a NULL-terminated array
     * of "Name: value" lines to send as they are (Range, If-Range, If-None-Match, Accept-Encoding:
     * identity, User-Agent, the header options). Before returning, on the thread it was called on,
     * it reports the final response (after any redirects it follows) with
     * assetpatch_transport_head, then the body bytes in order with assetpatch_transport_body, as
     * received (not decoded: a body with a Content-Encoding other than identity is refused).
     * Returns 0 when the response ended, whatever its status; non-zero when the transfer failed
     * (no connection, a reset, a timeout, a body cut short): the library retries that as it retries
     * a network failure (a body shorter than its Content-Length is such a failure whatever perform
     * returns). When either report returns non-zero, it stops and returns. Redirects: a request
     * that must not follow them (a key document, unless allow_cross_origin_keys) refuses a
     * response whose final URL differs from the one asked for. Called on the library's threads,
     * one request at a time per update or group fetch; timeouts, and how long a pause holds the
     * connection, are the transport's own (cancellation reaches it as a refused report). */
    int (*perform)(void *userdata, const char *method, const char *url, const char *const *headers,
                   assetpatch_transport_response *response);
    void *userdata;  /* passed to perform; the host keeps it (and perform) valid until the client
                        is closed: an update that began before another transport was set goes on
                        with this one */
} assetpatch_transport;

#define ASSETPATCH_TRANSPORT_SIZE_0_5 24

/* Makes transport (copied; NULL: libcurl again) perform every later request of this client.
 * @return ASSETPATCH_OK; ERR_ARGUMENT (NULL c, size below the first version, NULL perform). */
ASSETPATCH_WARN_UNUSED_RESULT
int assetpatch_set_transport(assetpatch_client *c, const assetpatch_transport *transport);

/* Reports the response's status, its header lines ("Name: value", NULL-terminated array; NULL:
 * none) and the URL that answered after redirects (NULL: the one asked for). Once per response.
 * @return 0: go on with the body; non-zero: the library refuses the response (stop). */
int assetpatch_transport_head(assetpatch_transport_response *response, int status, const char *const *headers,
                              const char *final_url);

/* Hands over the next `length` body bytes. May block while the client is paused or capped.
 * @return 0: go on; non-zero: stop (cancelled, refused, a write failed). */
int assetpatch_transport_body(assetpatch_transport_response *response, const void *data, size_t length);

#ifdef __cplusplus
}
#endif

#if defined(__clang__)
#pragma clang diagnostic pop
#endif

#endif /* ASSETPATCH_H */
