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

/// `OPENSSL_free` is a macro and does not import.
static inline void midtier_openssl_free(void *p) { CRYPTO_free(p, __FILE__, __LINE__); }
/// `BIO_get_mem_data` is a macro and does not import.
static inline long midtier_bio_get_mem_data(BIO *b, char **pp) { return BIO_get_mem_data(b, pp); }
#endif
