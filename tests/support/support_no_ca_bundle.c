/* Test processes start without the system's TLS certificates.
 *
 * Criterion starts every test in a new process, and each one initializes libgit2 (a dependency
 * of Criterion: criterion_initialize calls it), whose mbedTLS backend parses the whole system CA
 * bundle (/etc/ssl/certs/ca-certificates.crt, some 140 certificates) through
 * mbedtls_x509_crt_parse_file. No test makes a TLS connection, so that work is thrown away, and
 * under the sanitizers it is dear: AddressSanitizer's strstr interceptor measures the rest of
 * the bundle at every certificate (quadratic in its size) and every parsed certificate is heap
 * memory that each leak check scans again. Skipping it takes about a sixth off the CPU time of a
 * bare Criterion process under ASan+UBSan (docs/reliability.md, "CI time").
 *
 * This definition in the test executable takes precedence over mbedTLS's (the same interposition
 * as support_sanitizers.c) and reports the file as unreadable, the case of a machine without a
 * bundle, which libgit2 accepts: it initializes without default certificates, and the diffs it
 * draws for failed string assertions are unchanged. Where libgit2 uses another TLS library the
 * definition is simply never called. */
/* mbedtls/x509_crt.h is not needed (nor installed with the test dependencies): only the name
 * and the calling convention matter; the chain is left untouched. */
struct mbedtls_x509_crt;
int mbedtls_x509_crt_parse_file(struct mbedtls_x509_crt *chain, const char *path);

/* MBEDTLS_ERR_X509_FILE_IO_ERROR: "read/write of file failed". */
#define MX_TESTS_MBEDTLS_FILE_IO_ERROR (-0x2900)

int mbedtls_x509_crt_parse_file(struct mbedtls_x509_crt *chain, const char *path) {
  (void)chain;
  (void)path;
  return MX_TESTS_MBEDTLS_FILE_IO_ERROR;
}
