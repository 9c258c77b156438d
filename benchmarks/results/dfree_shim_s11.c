// LD_PRELOAD detector for small heap chunks (requests <= SMALL bytes), eleventh session.
// Tracks every small chunk's state (allocated / freed) and, for a freed one, the thread and
// call stack of its free. A second free of a chunk already freed (and not handed out again)
// prints both stacks and aborts: the case glibc's tcache misses when two threads free it.
// Freed chunks are poisoned and held back (QUARANTINE of them) before glibc may reuse them;
// a changed byte when one leaves the quarantine is a write after free: its free's stack.
// Build: gcc -O2 -g -fPIC -shared -o dfree.so dfree_shim_s11.c -lpthread
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <pthread.h>
#include <malloc.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

#define SMALL 24
#define DEPTH 10
#define CAP (1u << 22)
#define QUARANTINE (1u << 20)  // small chunks held back, poisoned, before glibc may reuse them
#define POISON 0xA5
enum { EMPTY = 0, ALLOC = 1, FREED = 2 };
typedef struct { uintptr_t key; int state; int tid; void *frames[DEPTH]; } entry;

static entry *table;
static void **ring;
static size_t ring_head, ring_len;
static volatile int lock_word;
static volatile int ready;

static void lock(void) { while (__atomic_exchange_n(&lock_word, 1, __ATOMIC_ACQUIRE)) { while (lock_word) sched_yield(); } }
static void unlock(void) { __atomic_store_n(&lock_word, 0, __ATOMIC_RELEASE); }
static inline size_t slot(uintptr_t k) { k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33; return k & (CAP - 1); }

static entry *find(uintptr_t k) {
  for (size_t i = slot(k);; i = (i + 1) & (CAP - 1)) {
    if (table[i].key == k) return &table[i];
    if (table[i].key == 0) return NULL;
  }
}
static entry *insert(uintptr_t k) {
  for (size_t i = slot(k);; i = (i + 1) & (CAP - 1)) {
    if (table[i].key == k || table[i].key == 0) { table[i].key = k; return &table[i]; }
  }
}
static void erase(uintptr_t k) {  // backward-shift deletion (linear probing)
  size_t i = slot(k);
  for (;; i = (i + 1) & (CAP - 1)) { if (table[i].key == 0) return; if (table[i].key == k) break; }
  size_t j = i;
  for (;;) {
    table[i].key = 0;
    for (;;) {
      j = (j + 1) & (CAP - 1);
      if (table[j].key == 0) return;
      size_t h = slot(table[j].key);
      if ((i <= j) ? (i < h && h <= j) : (i < h || h <= j)) continue;
      break;
    }
    table[i] = table[j];
    i = j;
  }
}

static void prepare(void) { lock(); }
static void release(void) { unlock(); }

__attribute__((constructor)) static void init(void) {
  void *b[4];
  backtrace(b, 4);  // loads the unwinder now, not inside free
  table = mmap(NULL, sizeof(entry) * (size_t)CAP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ring = mmap(NULL, sizeof(void *) * (size_t)QUARANTINE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  pthread_atfork(prepare, release, release);
  ready = 1;
}

static void note_alloc(void *p, size_t n) {
  if (!p || !ready) return;
  lock();
  if (n <= SMALL) { entry *e = insert((uintptr_t)p); e->state = ALLOC; }
  else erase((uintptr_t)p);
  unlock();
}

static void report(void *p, entry *first, int tid, void **frames, int depth) {
  char buf[256];
  int n = snprintf(buf, sizeof buf, "\nDFREE pid %d: chunk %p freed twice: first by tid %d, again by tid %d\n--- first free:\n", getpid(), p, first->tid, tid);
  write(2, buf, n);
  backtrace_symbols_fd(first->frames, DEPTH, 2);
  write(2, "--- second free:\n", 17);
  backtrace_symbols_fd(frames, depth, 2);
  raise(SIGABRT);
}

static void report_write(void *p, entry *first, size_t usable) {
  char buf[512];
  int n = snprintf(buf, sizeof buf, "\nDFREE pid %d: chunk %p written after its free (freed by tid %d); bytes:", getpid(), p, first->tid);
  for (size_t i = 0; i < usable && n < 480; i++) n += snprintf(buf + n, sizeof buf - n, " %02x", ((unsigned char *)p)[i]);
  n += snprintf(buf + n, sizeof buf - n, "\n--- its free:\n");
  write(2, buf, n);
  backtrace_symbols_fd(first->frames, DEPTH, 2);
  raise(SIGABRT);
}

// Returns 1 when the caller must hand p to glibc now (not a tracked small chunk).
static int note_free(void *p) {
  if (!p || !ready) return 1;
  void *frames[DEPTH] = {0};
  int depth = backtrace(frames, DEPTH);
  int tid = (int)syscall(SYS_gettid);
  lock();
  entry *e = find((uintptr_t)p);
  if (!e) { unlock(); return 1; }
  if (e->state == FREED) { entry copy = *e; unlock(); report(p, &copy, tid, frames, depth); return 0; }
  e->state = FREED; e->tid = tid; memcpy(e->frames, frames, sizeof frames);
  size_t usable = malloc_usable_size(p);
  memset(p, POISON, usable);
  void *old = NULL;
  if (ring_len == QUARANTINE) { old = ring[ring_head]; ring[ring_head] = p; ring_head = (ring_head + 1) % QUARANTINE; }
  else ring[(ring_head + ring_len++) % QUARANTINE] = p;
  if (old) {
    size_t u = malloc_usable_size(old);
    for (size_t i = 0; i < u; i++) {
      if (((unsigned char *)old)[i] != POISON) { entry *f = find((uintptr_t)old); entry copy = *f; unlock(); report_write(old, &copy, u); return 0; }
    }
  }
  unlock();
  if (old) __libc_free(old);
  return 0;
}

void *malloc(size_t n) { void *p = __libc_malloc(n); note_alloc(p, n); return p; }
void *calloc(size_t a, size_t b) { void *p = __libc_calloc(a, b); note_alloc(p, a * b); return p; }
void free(void *p) { if (note_free(p)) __libc_free(p); }
void *realloc(void *p, size_t n) {
  if (!p) return malloc(n);
  size_t old = malloc_usable_size(p);
  void *q = malloc(n ? n : 1);
  if (!q) return NULL;
  memcpy(q, p, old < n ? old : n);
  free(p);
  return q;
}
void *memalign(size_t a, size_t n) { void *p = __libc_memalign(a, n); note_alloc(p, n); return p; }
void *aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) { void *p = memalign(a, n); if (!p) return 12; *out = p; return 0; }
void *valloc(size_t n) { return memalign(sysconf(_SC_PAGESIZE), n); }
void *pvalloc(size_t n) { size_t pg = sysconf(_SC_PAGESIZE); return memalign(pg, (n + pg - 1) & ~(pg - 1)); }
