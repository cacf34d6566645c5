/// Key material made for the fuzz targets only (`openssl req -x509 -newkey rsa:2048`, `openssl
/// ecparam -name prime256v1`); nothing trusts it outside these targets. The private halves are
/// here so that `midtier-fuzz make-seeds` can sign the valid seeds (an assertion, tokens).
enum FuzzKeys {
    /// The SAML signing certificate the `saml` target's verifier trusts.
    static let samlCertificatePEM = """
        -----BEGIN CERTIFICATE-----
        MIIDJTCCAg2gAwIBAgIUG+M/sdlA5ePHUnuXrdq5jXTMLuQwDQYJKoZIhvcNAQEL
        BQAwITEfMB0GA1UEAwwWbWlkdGllci1mdXp6IHRlc3Qgb25seTAgFw0yNjExMjgw
        MjMzMTlaGA8yMTI2MTEwNDAyMzMxOVowITEfMB0GA1UEAwwWbWlkdGllci1mdXp6
        IHRlc3Qgb25seTCCASIwDQYJKoZIhvcNAQEBBQADggEPADCCAQoCggEBALFy0se3
        XYyxwCUpfdwzSom6IVynsryhKKklua4eCdp6Myq1+nstEswGlfClnd+EzQJ3lGgY
        YmtVfyuHf2oqBLAbqd9bah+rR+YX8VgvhRqVTVDUHr3CMHHSP+4ljEzO6INa9r7a
        +tAVrteaH9FDr94WcKeG9Qw6tYjCFW/wYzwQQvTiVMFRvWo3SvxZPdWLDY855VyO
        QazsLF9qL0C2+5L2kNK6Qi16o4U72MU2x4BtGQtYRJiNXOIqSMNci2Lm0gCNhzRU
        XPmImSnMdGGUrc8nbUFAayDk4B/bBOfWghZfsKD2K6aFLw5hB/6XMuXoX6b+EIwh
        eNfJy/YtiQ1s3psCAwEAAaNTMFEwHQYDVR0OBBYEFNJQ/AzCXi7xBdk4Vddw2ro+
        Wa1cMB8GA1UdIwQYMBaAFNJQ/AzCXi7xBdk4Vddw2ro+Wa1cMA8GA1UdEwEB/wQF
        MAMBAf8wDQYJKoZIhvcNAQELBQADggEBAK0aGGI1fHUmLfTepZgzUQC2W2LCZnPA
        /iO4uw6UroqV5G/hiCwCTVgSCGbY881U7KNFtTzjHfLpJGcvjLq18fTJCGMaQ8p7
        utgGUcwW0lvqR4KTySgzYht8geYv0g7mfSTsnmJDzZ8E7qO8lL4KSchY3zNzFoU6
        D5JvR3rU4szuchSG2wKsEv3LbXHcbSKoWxAykhtWU/ZBl0kvRHJvJP2qd+4QnDOO
        UOEs8nj9eHJZ34MeTWTGLZ12BHwja3hNM4UdvfjKjBUN/msNpb9kZFbck2qJu2nA
        owHi1atl6Nmsd8Bry1bBKPY8JdLsqaTBOTuoRFOiOR2A8ivuagXFfSg=
        -----END CERTIFICATE-----
        """

    /// Its private key (RSA 2048), for signing the seed assertion.
    static let samlKeyPEM = """
        -----BEGIN PRIVATE KEY-----
        MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCxctLHt12MscAl
        KX3cM0qJuiFcp7K8oSipJbmuHgnaejMqtfp7LRLMBpXwpZ3fhM0Cd5RoGGJrVX8r
        h39qKgSwG6nfW2ofq0fmF/FYL4UalU1Q1B69wjBx0j/uJYxMzuiDWva+2vrQFa7X
        mh/RQ6/eFnCnhvUMOrWIwhVv8GM8EEL04lTBUb1qN0r8WT3Viw2POeVcjkGs7Cxf
        ai9AtvuS9pDSukIteqOFO9jFNseAbRkLWESYjVziKkjDXIti5tIAjYc0VFz5iJkp
        zHRhlK3PJ21BQGsg5OAf2wTn1oIWX7Cg9iumhS8OYQf+lzLl6F+m/hCMIXjXycv2
        LYkNbN6bAgMBAAECggEAPO3nUCo3FgNGrbv0enKmKmpd4Dm41qojkwjgG9g2m+0P
        up+ntTnB1YqBW5MShVhNKIa0z5Vn3eEKfIDXEDYDTBEDoCz8YIloc6pO9W/DrWAM
        ny9mqtON3NdLmlMMPKdjEQ9f4CLCskZvtZo3SJyMO57K6cseQye5g47Y24nYGRwN
        ze6iqs3CDSDeFrctz21rw8ad4ybBQVc5ZR+2mou1aX5PwI7gBAL7xPhqk8J0IZgK
        lOuU0eZ21u5AAn0bjiKugrelSJ8fFMf8uFbjxdbMtv6eVKjkelKodu1GhwrRSAIv
        bvnzDn+UTxUvmZ1iIJhi5DQgF8Nzf9wWM8u5eE3BuQKBgQDe36W09woK+2j2HHvA
        8jHgAYP3JuEx+bXvvNePHBqwb5NVRCiCx/sDZY7jxeC3cV02p5DhRFiTz8oa7kox
        JtDzJy6njiUqIctoRwek9BTgSNlTrD6RKcXdtYB3I0TY+vvyk0row8+enBhrJmUN
        +I1+lu92Q39q9GnMD6mN65LVLQKBgQDL0r+6kJvk9MMrQOPo0bN97LK3ANlGtu0r
        jimaX074M/dKuRNFbtDSAlhyq0D+wUfUroqy1/Cn7aEdi2LlWixGPk91ct9xacxN
        5ycw3lV3KIytUoh/0T99t1EssMsJ68NmfQyy1ZLkP3AAOtQICB4UMTrjF9Ka6okO
        SvIuB4Bv5wKBgQCLiC0wPLGW6ott+asowviiq5A4/ahjJ1jWPL4fpJK4/0GYUlGi
        fx0RpVVuGIZ1ko2vF/1GawmhkKeRcLoWR5ztfgxhbkaqN/om0MFibkVbnYAiOGX7
        b9Gm2mkRLY1+4rM1zS1KyLyFKmjHPIRr2L6NEGXe/qcZCOfrj6qxZVjKCQKBgB7x
        HnQXEeN/GMXPMwocE5CRR0wqz9FBYd3T1hL+VwGs+eSZFgjbWs4W1xCJWPOTqfDq
        klm2GG2V0HiouVmyB7ieKvfceXlBI2fMKJHtnrHZMQn61of43xeZpbQQHrKh3OcJ
        Is1fSM5npvwR8jBJ8y8Djjn9WtZztly6GevM7b2PAoGAGds0WZrtScILMXnwqjpT
        Blq+kdSq0Z/YTudT5ocBERqPIFFwCLzgQnV1G9OfWzRrGblq56kwsF04TyF5fRI6
        amZkdsy5UjyO17Vgz0bQqwPnRRFBw5hr7d1o1P/xNMy9wueFo13w96tEGeUiE8ss
        UmWvT/yReupxuNSxJthwVcQ=
        -----END PRIVATE KEY-----
        """

    /// The `jwt` target's JWKS: one ES256 key, kid `fuzz-1`.
    static let jwks =
        #"{"keys": [{"kty": "EC", "crv": "P-256", "x": "4vyUZhQ58BbrqZqslgMa8sftwKAjiyjOduQY2NAtazE", "y": "RYXIE86WrucKYOV-vdU-UpXVzFIYOLzcrNeT17kjq6I", "kid": "fuzz-1", "use": "sig", "alg": "ES256"}]}"#

    /// Its private key (P-256), for signing the seed tokens (scripts/fuzz-seeds.py).
    static let jwtKeyPEM = """
        -----BEGIN EC PRIVATE KEY-----
        MHcCAQEEINUHSmcsMZB8dW7azRsl854JoGKb56F+OHUyXHCSj4jUoAoGCCqGSM49
        AwEHoUQDQgAE4vyUZhQ58BbrqZqslgMa8sftwKAjiyjOduQY2NAtazFFhcgTzpau
        5wpg5X691T5SldXMUhg4vNys15PXuSOrog==
        -----END EC PRIVATE KEY-----
        """
}
