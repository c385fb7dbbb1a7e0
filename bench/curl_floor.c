/* The floor under the library's memory: what a C host maps to download a URL with libcurl
 * and hash it with libcrypto's sha256, and nothing else.
 *   curl_floor URL        prints the sha256; exit 0 on a 2xx response
 * speed_bench.py measures its peak RSS on the update's archive in the same run as the update. */
#include <curl/curl.h>
#include <openssl/evp.h>
#include <stdio.h>

static size_t hash(char *data, size_t size, size_t count, void *ctx) {
    return EVP_DigestUpdate(ctx, data, size * count) == 1 ? size * count : 0;
}

int main(int argc, char **argv) {
    if (argc != 2 || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 2;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_MD *sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (!ctx || !sha256 || EVP_DigestInit_ex(ctx, sha256, NULL) != 1) return 2;
    CURL *curl = curl_easy_init();
    if (!curl) return 2;
    curl_easy_setopt(curl, CURLOPT_URL, argv[1]);
    curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, hash);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, ctx);
    CURLcode rc = curl_easy_perform(curl);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    for (unsigned int i = 0; i < len; i++) printf("%02x", md[i]);
    printf("\n");
    curl_easy_cleanup(curl);
    EVP_MD_free(sha256);
    EVP_MD_CTX_free(ctx);
    curl_global_cleanup();
    return rc == CURLE_OK ? 0 : 1;
}
