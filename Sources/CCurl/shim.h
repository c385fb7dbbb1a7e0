#ifndef ASSETPATCH_CCURL_SHIM_H
#define ASSETPATCH_CCURL_SHIM_H
#include <curl/curl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one typed
   wrapper per argument type. Internal: static inline, and named for their module, never with
   the library's public assetpatch_ prefix. */
static inline CURLcode ccurl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_setopt_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_setopt_write(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, f); }
static inline CURLcode ccurl_setopt_header(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, f); }
static inline CURLcode ccurl_setopt_read(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, CURLOPT_READFUNCTION, f); }
static inline CURLcode ccurl_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_getinfo_str(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLMcode ccurl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }

/* TCP_QUICKACK (Linux): acknowledge received segments at once instead of after the delayed-ACK
   timer. The kernel leaves quick-ACK mode again on its own, so it is set when a socket is made
   and again whenever a response head has arrived. Best effort: failures are ignored. */
static inline void ccurl_quickack_fd(curl_socket_t fd) {
#ifdef TCP_QUICKACK
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
#else
    (void)fd;
#endif
}
static inline int ccurl_quickack_sockopt(void *user, curl_socket_t fd, curlsocktype purpose) {
    (void)user;
    if (purpose == CURLSOCKTYPE_IPCXN) ccurl_quickack_fd(fd);
    return CURL_SOCKOPT_OK;
}
static inline CURLcode ccurl_setopt_quickack_sockets(CURL *h) { return curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, ccurl_quickack_sockopt); }
static inline void ccurl_quickack(CURL *h) {
    curl_socket_t fd = CURL_SOCKET_BAD;
    if (curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &fd) == CURLE_OK && fd != CURL_SOCKET_BAD) ccurl_quickack_fd(fd);
}
/* Lets a transfer its write callback paused (CURL_WRITEFUNC_PAUSE) go on: libcurl hands the
   piece it kept to the callback again, from within this call. */
static inline CURLcode ccurl_unpause(CURL *h) { return curl_easy_pause(h, CURLPAUSE_CONT); }
/* The sockets of one multi loop's connections, recorded as libcurl opens and closes them (an
   in-progress transfer's socket can't be asked for: CURLINFO_ACTIVESOCKET answers only once it
   is done), so that a long pause can read what arrived before the connections close. */
#define CCURL_MAX_SOCKETS 64
typedef struct ccurl_sockets {
    curl_socket_t fds[CCURL_MAX_SOCKETS];
    int count;
    int receive_buffer;  /* > 0: SO_RCVBUF of each new connection (under a cap) */
} ccurl_sockets;
static inline curl_socket_t ccurl_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a) {
    ccurl_sockets *s = (ccurl_sockets *)clientp;
    (void)purpose;
    curl_socket_t fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    if (fd != CURL_SOCKET_BAD && s->receive_buffer > 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &s->receive_buffer, sizeof s->receive_buffer);
    if (fd != CURL_SOCKET_BAD && s->count < CCURL_MAX_SOCKETS) s->fds[s->count++] = fd;
    return fd;
}
static inline int ccurl_close_socket(void *clientp, curl_socket_t fd) {
    ccurl_sockets *s = (ccurl_sockets *)clientp;
    for (int i = 0; i < s->count; i++)
        if (s->fds[i] == fd) { s->fds[i] = s->fds[--s->count]; break; }
    return close(fd);
}
static inline CURLcode ccurl_setopt_track_sockets(CURL *h, ccurl_sockets *s) {
    CURLcode rc = curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, ccurl_open_socket);
    if (rc == CURLE_OK) rc = curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, (void *)s);
    if (rc == CURLE_OK) rc = curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, ccurl_close_socket);
    if (rc == CURLE_OK) rc = curl_easy_setopt(h, CURLOPT_CLOSESOCKETDATA, (void *)s);
    return rc;
}
/* Bytes that arrived on the connections and wait in the kernel (FIONREAD). */
static inline long ccurl_sockets_pending(const ccurl_sockets *s) {
    long total = 0;
    for (int i = 0; i < s->count; i++) {
        int n = 0;
        if (ioctl(s->fds[i], FIONREAD, &n) == 0 && n > 0) total += n;
    }
    return total;
}
/* Shrinks the connections' receive buffers, so that once read the window a server may fill is
   small: what arrives after is lost when they close. Best effort. */
static inline void ccurl_sockets_shrink(const ccurl_sockets *s) {
    int size = 4096;
    for (int i = 0; i < s->count; i++) (void)setsockopt(s->fds[i], SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
}
#endif
