#ifndef MIDTIER_COPENSSL_SHIM_H
#define MIDTIER_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <openssl/rsa.h>
#include <openssl/core_names.h>
#include <openssl/params.h>

/// `OPENSSL_free` is a macro and does not import.
static inline void midtier_openssl_free(void *p) { CRYPTO_free(p, __FILE__, __LINE__); }
/// `BIO_get_mem_data` is a macro and does not import.
static inline long midtier_bio_get_mem_data(BIO *b, char **pp) { return BIO_get_mem_data(b, pp); }

/// An HMAC-SHA256 context keyed with `key`, to be started again (`EVP_MAC_init` without a key)
/// for each message: the one-shot `HMAC()` fetches the algorithm by name on every call. NULL
/// on failure.
/// (`OSSL_PARAM_construct_utf8_string` takes a mutable string, which Swift cannot pass.)
static inline EVP_MAC_CTX *midtier_hmac_sha256_new(const unsigned char *key, size_t key_length) {
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (mac == NULL) return NULL;
    EVP_MAC_CTX *context = EVP_MAC_CTX_new(mac);
    EVP_MAC_free(mac);
    if (context == NULL) return NULL;
    char digest[] = "SHA256";
    OSSL_PARAM params[2] = { OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_construct_end() };
    if (EVP_MAC_init(context, key, key_length, params) != 1) {
        EVP_MAC_CTX_free(context);
        return NULL;
    }
    return context;
}
#endif
