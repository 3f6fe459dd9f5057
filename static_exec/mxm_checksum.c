/* The checksums of an .mxm weights section (or side weights file).
 *
 * Kind 0 (MX__MXM_SUM_LANES, format 2): one 64-bit word step in four independent lanes over
 * 32-byte blocks of the whole section, a zero-padded last block, the lanes folded and mixed.
 * Kind 1 (MX__MXM_SUM_CHUNKED, format 3, what is written now): the section cut into chunks of
 * MX__MXM_SUM_CHUNK bytes, each summed as kind 0 sums a section of its length, the chunk sums
 * folded in order. The chunks are independent, so a loader checks them on every core at once:
 * checking a large section sequentially cost about twice reading it (the step is fast enough,
 * but one core's loads from a 4 KiB-page mapping do not reach the memory bandwidth several do).
 * Both are computed in pieces of any size while a file is written. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/progress.h"
#include "static_exec/mxm_info.h"

#define GOLDEN  0x9e3779b97f4a7c15ull
#define SEED    0x6a09e667f3bcc909ull
#define MIX     0xff51afd7ed558ccdull
#define MAX_CHECK_THREADS 8

/* A little-endian word at p: one load on a little-endian host. */
static inline uint64_t word_at(const unsigned char *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
#else
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
#endif
}

static uint64_t final_mix(uint64_t h) {
  h ^= h >> 33;
  h *= MIX;
  h ^= h >> 33;
  return h;
}

/* --- kind 0: the lanes sum -------------------------------------------------------------------- */

static void lanes_init(mx__mxm_lanes *ls, uint64_t n) {
  memset(ls, 0, sizeof *ls);
  ls->n = n;
  for (int k = 0; k < 4; k++) ls->lane[k] = (SEED ^ n) + (uint64_t)k * GOLDEN;
}

static void lanes_blocks(mx__mxm_lanes *ls, const unsigned char *p, size_t n) {
  uint64_t a = ls->lane[0], b = ls->lane[1], c = ls->lane[2], d = ls->lane[3];
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a = (a ^ word_at(p + i)) * GOLDEN;
    b = (b ^ word_at(p + i + 8)) * GOLDEN;
    c = (c ^ word_at(p + i + 16)) * GOLDEN;
    d = (d ^ word_at(p + i + 24)) * GOLDEN;
    a ^= a >> 32;
    b ^= b >> 32;
    c ^= c >> 32;
    d ^= d >> 32;
  }
  ls->lane[0] = a, ls->lane[1] = b, ls->lane[2] = c, ls->lane[3] = d;
}

static void lanes_update(mx__mxm_lanes *ls, const unsigned char *p, size_t n) {
  size_t i = 0;
  if (ls->n_carry) {
    while (ls->n_carry < 32 && i < n) ls->carry[ls->n_carry++] = p[i++];
    if (ls->n_carry < 32) return;
    lanes_blocks(ls, ls->carry, 32);
    ls->n_carry = 0;
  }
  size_t whole = (n - i) & ~(size_t)31;
  lanes_blocks(ls, p + i, whole);
  i += whole;
  while (i < n) ls->carry[ls->n_carry++] = p[i++];
}

static uint64_t lanes_finish(mx__mxm_lanes *ls) {
  if (ls->n_carry) {
    memset(ls->carry + ls->n_carry, 0, 32 - ls->n_carry);
    lanes_blocks(ls, ls->carry, 32);
    ls->n_carry = 0;
  }
  uint64_t h = SEED ^ ls->n;
  for (int k = 0; k < 4; k++) {
    h = (h ^ ls->lane[k]) * GOLDEN;
    h ^= h >> 32;
  }
  return final_mix(h);
}

/* Kind 0 over n bytes, with progress lines (stage). */
static uint64_t lanes_checksum(const unsigned char *p, size_t n, const char *stage) {
  mx__mxm_lanes ls;
  lanes_init(&ls, n);
  size_t step = (size_t)64 << 20;
  for (size_t i = 0; i < n; i += step) {
    size_t len = n - i < step ? n - i : step;
    lanes_update(&ls, p + i, len);
    mx__progress_bytes(stage, i + len, n);
  }
  return lanes_finish(&ls);
}

/* --- kind 1: chunks --------------------------------------------------------------------------- */

/* Bytes of the chunk starting at `start` in a section of `total` bytes. */
static uint64_t chunk_len(uint64_t total, uint64_t start) {
  return total - start < MX__MXM_SUM_CHUNK ? total - start : MX__MXM_SUM_CHUNK;
}

static uint64_t chunk_sum(const unsigned char *p, uint64_t len) {
  mx__mxm_lanes ls;
  lanes_init(&ls, len);
  lanes_update(&ls, p, (size_t)len);
  return lanes_finish(&ls);
}

static uint64_t fold_chunk(uint64_t h, uint64_t chunk) {
  h = (h ^ chunk) * GOLDEN;
  return h ^ (h >> 29);
}

static uint64_t chunks_seed(uint64_t total) { return (SEED ^ total) * MIX; }

void mx__mxm_sum_init(mx__mxm_sum *s, uint32_t kind, uint64_t total) {
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->total = total;
  s->h = chunks_seed(total);
  lanes_init(&s->cur, kind == MX__MXM_SUM_CHUNKED ? chunk_len(total, 0) : total);
}

void mx__mxm_sum_update(mx__mxm_sum *s, const unsigned char *p, size_t n) {
  if (s->kind != MX__MXM_SUM_CHUNKED) {
    lanes_update(&s->cur, p, n);
    return;
  }
  while (n && s->start < s->total) {
    uint64_t len = chunk_len(s->total, s->start), room = len - s->in_chunk;
    size_t take = n < room ? n : (size_t)room;
    lanes_update(&s->cur, p, take);
    p += take;
    n -= take;
    s->in_chunk += take;
    if (s->in_chunk == len) {
      s->h = fold_chunk(s->h, lanes_finish(&s->cur));
      s->start += len;
      s->in_chunk = 0;
      lanes_init(&s->cur, chunk_len(s->total, s->start));
    }
  }
}

uint64_t mx__mxm_sum_finish(mx__mxm_sum *s) {
  if (s->kind != MX__MXM_SUM_CHUNKED) return lanes_finish(&s->cur);
  if (s->in_chunk) s->h = fold_chunk(s->h, lanes_finish(&s->cur)); /* fewer bytes than announced */
  return final_mix(s->h);
}

/* Chunks shared out to the checking threads. */
typedef struct chunk_job {
  const unsigned char *p;
  uint64_t n, n_chunks;
  uint64_t *sums; /* one per chunk */
  atomic_uint_fast64_t next, done;
  const char *stage;
} chunk_job;

static void run_chunks(chunk_job *j, bool report) {
  for (;;) {
    uint64_t i = atomic_fetch_add(&j->next, 1);
    if (i >= j->n_chunks) return;
    uint64_t start = i * MX__MXM_SUM_CHUNK, len = chunk_len(j->n, start);
    j->sums[i] = chunk_sum(j->p + start, len);
    uint64_t done = atomic_fetch_add(&j->done, len) + len;
    if (report) mx__progress_bytes(j->stage, done, j->n);
  }
}

static void *chunk_worker(void *arg) {
  run_chunks(arg, false);
  return NULL;
}

/* Kind 1 over n bytes: the chunks summed on up to one thread per core, then folded in order. */
static uint64_t chunked_checksum(const unsigned char *p, size_t n, const char *stage) {
  uint64_t n_chunks = (n + MX__MXM_SUM_CHUNK - 1) / MX__MXM_SUM_CHUNK;
  uint64_t *sums = n_chunks ? malloc(n_chunks * sizeof *sums) : NULL;
  if (!sums) { /* no chunks, or no memory for their sums: one pass on this thread */
    mx__mxm_sum s;
    mx__mxm_sum_init(&s, MX__MXM_SUM_CHUNKED, n);
    mx__mxm_sum_update(&s, p, n);
    mx__progress_bytes(stage, n, n);
    return mx__mxm_sum_finish(&s);
  }
  chunk_job j = {.p = p, .n = n, .n_chunks = n_chunks, .sums = sums, .stage = stage};
  atomic_init(&j.next, 0);
  atomic_init(&j.done, 0);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  uint64_t want = cores > 1 ? (uint64_t)cores : 1;
  if (want > MAX_CHECK_THREADS) want = MAX_CHECK_THREADS;
  if (want > n_chunks) want = n_chunks;
  pthread_t helpers[MAX_CHECK_THREADS];
  size_t started = 0;
  for (; started + 1 < want; started++) /* a helper that cannot start leaves its share here */
    if (pthread_create(&helpers[started], NULL, chunk_worker, &j) != 0) break;
  run_chunks(&j, true);
  for (size_t i = 0; i < started; i++) pthread_join(helpers[i], NULL);
  uint64_t h = chunks_seed(n);
  for (uint64_t i = 0; i < n_chunks; i++) h = fold_chunk(h, sums[i]);
  free(sums);
  return final_mix(h);
}

uint64_t mx__mxm_section_checksum(uint32_t kind, const unsigned char *p, size_t n, const char *stage) {
  return kind == MX__MXM_SUM_CHUNKED ? chunked_checksum(p, n, stage) : lanes_checksum(p, n, stage);
}

/* --- checking through read() ------------------------------------------------------------------ */

/* A fresh mapping's first touch of each page costs far more than the kernel's copy of the same
 * cached page (on the hosts measured, checking a 4.1 GB section through its new mapping took
 * 2.3-2.6 s, reading it with pread 1.5 s, `cat` 1.0 s): the check reads the file instead, in
 * 1 MiB pieces per thread, and the mapping's pages are touched only when the weights are used. */
#define READ_PIECE ((size_t)1 << 20)

typedef struct fd_job {
  int fd;
  uint64_t offset, n, n_chunks;
  uint32_t kind;
  uint64_t *sums;
  atomic_uint_fast64_t next, done;
  atomic_bool failed;
  const char *stage;
} fd_job;

/* Sums bytes [start, start + len) of the job's range into s through buf. False on a read error. */
static bool read_sum(fd_job *j, mx__mxm_sum *s, uint64_t start, uint64_t len, unsigned char *buf, bool report) {
  for (uint64_t o = 0; o < len;) {
    size_t want = len - o < READ_PIECE ? (size_t)(len - o) : READ_PIECE;
    ssize_t got = pread(j->fd, buf, want, (off_t)(j->offset + start + o));
    if (got <= 0) return false;
    mx__mxm_sum_update(s, buf, (size_t)got);
    o += (uint64_t)got;
    uint64_t done = atomic_fetch_add(&j->done, (uint64_t)got) + (uint64_t)got;
    if (report && (done % MX__MXM_SUM_CHUNK < (uint64_t)got || done == j->n))
      mx__progress_bytes(j->stage, done, j->n);
  }
  return true;
}

static void run_fd_chunks(fd_job *j, bool report) {
  unsigned char *buf = malloc(READ_PIECE);
  if (!buf) {
    atomic_store(&j->failed, true);
    return;
  }
  for (;;) {
    uint64_t i = atomic_fetch_add(&j->next, 1);
    if (i >= j->n_chunks || atomic_load(&j->failed)) break;
    uint64_t start = i * MX__MXM_SUM_CHUNK, len = chunk_len(j->n, start);
    mx__mxm_sum s;
    mx__mxm_sum_init(&s, MX__MXM_SUM_LANES, len); /* one chunk: the lanes sum of its length */
    if (!read_sum(j, &s, start, len, buf, report)) {
      atomic_store(&j->failed, true);
      break;
    }
    j->sums[i] = mx__mxm_sum_finish(&s);
  }
  free(buf);
}

static void *fd_worker(void *arg) {
  run_fd_chunks(arg, false);
  return NULL;
}

bool mx__mxm_section_checksum_fd(uint32_t kind, int fd, uint64_t offset, uint64_t n, const char *stage,
                                 uint64_t *out) {
  fd_job j = {.fd = fd, .offset = offset, .n = n, .kind = kind, .stage = stage};
  atomic_init(&j.next, 0);
  atomic_init(&j.done, 0);
  atomic_init(&j.failed, false);
  if (kind != MX__MXM_SUM_CHUNKED || n == 0) { /* one sequential pass */
    unsigned char *buf = malloc(READ_PIECE);
    if (!buf) return false;
    mx__mxm_sum s;
    mx__mxm_sum_init(&s, kind, n);
    bool ok = read_sum(&j, &s, 0, n, buf, true);
    free(buf);
    *out = mx__mxm_sum_finish(&s);
    return ok;
  }
  j.n_chunks = (n + MX__MXM_SUM_CHUNK - 1) / MX__MXM_SUM_CHUNK;
  j.sums = malloc(j.n_chunks * sizeof *j.sums);
  if (!j.sums) return false;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  uint64_t want = cores > 1 ? (uint64_t)cores : 1;
  if (want > MAX_CHECK_THREADS) want = MAX_CHECK_THREADS;
  if (want > j.n_chunks) want = j.n_chunks;
  pthread_t helpers[MAX_CHECK_THREADS];
  size_t started = 0;
  for (; started + 1 < want; started++)
    if (pthread_create(&helpers[started], NULL, fd_worker, &j) != 0) break;
  run_fd_chunks(&j, true);
  for (size_t i = 0; i < started; i++) pthread_join(helpers[i], NULL);
  bool ok = !atomic_load(&j.failed);
  if (ok) {
    uint64_t h = chunks_seed(n);
    for (uint64_t i = 0; i < j.n_chunks; i++) h = fold_chunk(h, j.sums[i]);
    *out = final_mix(h);
  }
  free(j.sums);
  return ok;
}
