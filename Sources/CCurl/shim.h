#ifndef ASSETPATCH_CCURL_SHIM_H
#define ASSETPATCH_CCURL_SHIM_H
#include <curl/curl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one typed
   wrapper per argument type. Internal: static inline, and named for their module, never with
   the library's public assetpatch_ prefix. */
static inline CURLcode ccurl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_setopt_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_setopt_write(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, f); }
static inline CURLcode ccurl_setopt_header(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, f); }
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
#endif
