/*
 * ISA-L doing the work `uraid bench parity` times, with the same options and the same JSON
 * lines (kernel "isal"), so the two can be compared on one machine in one sitting.
 *
 *   xor       xor_gen over k data members into P                      (k+1 layouts)
 *   pq        pq_gen over k data members into P and Q                 (k+2 layouts)
 *   recover1  xor_gen over data 1..k-1 and P into data 0              (k+1 layouts)
 *   recover2  ec_encode_data: data 0 and 1 from data 2..k-1, P and Q  (k+2 layouts)
 *             (the decode rows come from inverting the survivors' rows of the Reed-Solomon
 *             matrix whose parity rows are 1,1,..1 and 1,2,4,..: md's P and Q)
 *
 * GB/s counts the data members' bytes (k * chunk per call), 10^9 bytes per GB; each figure is
 * the median of --runs runs of at least --seconds each, after a warm-up of a quarter of that.
 * Every operation's result on the first stripe is checked against a plain C reference before
 * and after it is timed; a difference is an error (exit 1) and no figure is printed.
 *
 * Build: gcc -O2 -o isal_bench isal_bench.c -lisal  (Debian: libisal-dev)
 * Usage: isal_bench [--json] [--op LIST] [--layout LIST] [--chunk LIST] [--working-set LIST]
 *                   [--runs N] [--seconds S]
 * Output is always JSON lines; --json is accepted for symmetry with uraid.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>

enum op { OP_XOR, OP_PQ, OP_REC1, OP_REC2, OP_COUNT };
static const char *const op_names[OP_COUNT] = { "xor", "pq", "recover1", "recover2" };
static int op_parity(int op) { return (op == OP_XOR || op == OP_REC1) ? 1 : 2; }

#define MIN_DATA 2
#define MAX_DATA 64
#define MAX_ITEMS 32
#define CHUNK_UNIT 4096ULL
#define MAX_CHUNK (64ULL << 20)

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "isal_bench: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(2);
}

/* A size: digits and an optional binary suffix K, M, G, T (B or iB may follow); a bare number
 * is in units of bare_unit bytes. Returns 0 on a malformed value. */
static unsigned long long parse_size(const char *s, unsigned long long bare_unit)
{
	char *end;
	errno = 0;
	if (!isdigit((unsigned char)*s))
		return 0;
	unsigned long long n = strtoull(s, &end, 10);
	if (errno)
		return 0;
	unsigned long long mult = bare_unit;
	if (*end) {
		char suf = (char)toupper((unsigned char)*end);
		const char *rest = end + 1;
		switch (suf) {
		case 'K': mult = 1ULL << 10; break;
		case 'M': mult = 1ULL << 20; break;
		case 'G': mult = 1ULL << 30; break;
		case 'T': mult = 1ULL << 40; break;
		case 'B': mult = 1; rest = end + 1; break;
		default: return 0;
		}
		if (suf != 'B' && (strcasecmp(rest, "") && strcasecmp(rest, "B") && strcasecmp(rest, "iB")))
			return 0;
		if (suf == 'B' && *rest)
			return 0;
	}
	return n * mult;
}

/* Split a comma-separated list in place; returns the item count. */
static int split(char *text, char **items, const char *option)
{
	int n = 0;
	char *p = text;
	for (;;) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = 0;
		if (!*p)
			die("%s: empty item in the list", option);
		if (n == MAX_ITEMS)
			die("%s: too many items", option);
		items[n++] = p;
		if (!comma)
			break;
		p = comma + 1;
	}
	return n;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One point of the matrix: pointers into a pool of stripes. */
struct ctx {
	int op, k, n;
	size_t chunk, stripes;
	unsigned char *pool;
	void **vec;               /* xor, pq, recover1: n pointers per stripe, output(s) last */
	unsigned char **surv;     /* recover2: k survivors per stripe */
	unsigned char **outs;     /* recover2: 2 outputs per stripe */
	unsigned char *tables;    /* recover2: ec_init_tables of the decode rows */
};

static unsigned char *member(struct ctx *c, size_t s, int i)
{
	return c->pool + (s * (size_t)c->n + (size_t)i) * c->chunk;
}

static int call(struct ctx *c, size_t s)
{
	int len = (int)c->chunk;
	switch (c->op) {
	case OP_XOR:
	case OP_REC1:
		return xor_gen(c->n, len, c->vec + s * (size_t)c->n);
	case OP_PQ:
		return pq_gen(c->n, len, c->vec + s * (size_t)c->n);
	default:
		ec_encode_data(len, c->k, 2, c->tables, c->surv + s * (size_t)c->k, c->outs + s * 2);
		return 0;
	}
}

static unsigned char mul2(unsigned char x) { return (unsigned char)((x << 1) ^ ((x & 0x80) ? 0x1d : 0)); }

/* The reference P (and Q) of stripe 0, byte by byte. */
static void reference_pq(struct ctx *c, unsigned char *p, unsigned char *q)
{
	for (size_t b = 0; b < c->chunk; b++) {
		unsigned char pp = 0, qq = 0;
		for (int i = c->k - 1; i >= 0; i--) {
			unsigned char d = member(c, 0, i)[b];
			pp ^= d;
			qq = (unsigned char)(mul2(qq) ^ d);
		}
		p[b] = pp;
		if (q)
			q[b] = qq;
	}
}

static void check_same(struct ctx *c, const char *when, const char *block, const unsigned char *got,
		       const unsigned char *want)
{
	for (size_t b = 0; b < c->chunk; b++) {
		if (got[b] != want[b]) {
			fprintf(stderr,
				"isal_bench: ISA-L computed the wrong bytes for %s %d+%d chunk %zu (%s): %s differs "
				"from the reference at byte %zu (0x%02x, expected 0x%02x); no figure is reported\n",
				op_names[c->op], c->k, op_parity(c->op), c->chunk, when, block, b, got[b], want[b]);
			exit(1);
		}
	}
}

/* Run the operation on stripe 0 and compare with the reference. For the recoveries stripe 0
 * holds consistent parity (set up once) and the members to rebuild are clobbered first. */
static void verify(struct ctx *c, unsigned char **want, const char *when)
{
	int nout = c->op == OP_REC1 ? 1 : 2;
	if (c->op == OP_REC1 || c->op == OP_REC2) {
		for (int j = 0; j < nout; j++)
			memset(member(c, 0, j), 0x5a, c->chunk);
	} else {
		for (int j = 0; j < op_parity(c->op); j++)
			memset(member(c, 0, c->k + j), 0x5a, c->chunk);
	}
	if (call(c, 0)) {
		fprintf(stderr, "isal_bench: %s %d+%d chunk %zu: ISA-L refused the call\n", op_names[c->op], c->k,
			op_parity(c->op), c->chunk);
		exit(1);
	}
	static const char *const parity_names[2] = { "P", "Q" };
	static const char *const data_names[2] = { "data member 0", "data member 1" };
	if (c->op == OP_XOR || c->op == OP_PQ) {
		for (int j = 0; j < op_parity(c->op); j++)
			check_same(c, when, parity_names[j], member(c, 0, c->k + j), want[j]);
	} else {
		for (int j = 0; j < nout; j++)
			check_same(c, when, data_names[j], member(c, 0, j), want[j]);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void bench(int op, int k, size_t chunk, unsigned long long set, int runs, double seconds)
{
	struct ctx c = { .op = op, .k = k, .n = k + op_parity(op), .chunk = chunk };
	size_t stripe = (size_t)c.n * chunk;
	c.stripes = set == 0 ? 1 : (size_t)((set + stripe - 1) / stripe);
	if (set != 0 && c.stripes < 2)
		c.stripes = 2;
	size_t bytes = c.stripes * stripe;
	if (posix_memalign((void **)&c.pool, 4096, bytes)) {
		fprintf(stderr, "isal_bench: cannot allocate %zu bytes\n", bytes);
		exit(1);
	}
	uint64_t x = 0x757261696401ULL ^ stripe;
	for (size_t w = 0; w < bytes / 8; w++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		((uint64_t *)c.pool)[w] = x * 0x2545f4914f6cdd1dULL;
	}

	c.vec = calloc(c.stripes * (size_t)c.n, sizeof(void *));
	c.surv = calloc(c.stripes * (size_t)k, sizeof(unsigned char *));
	c.outs = calloc(c.stripes * 2, sizeof(unsigned char *));
	for (size_t s = 0; s < c.stripes; s++) {
		void **v = c.vec + s * (size_t)c.n;
		if (op == OP_REC1) {
			/* survivors data 1..k-1 and P, then the output: data 0 */
			for (int i = 1; i <= k; i++)
				v[i - 1] = member(&c, s, i);
			v[k] = member(&c, s, 0);
		} else {
			for (int i = 0; i < c.n; i++)
				v[i] = member(&c, s, i);
		}
		if (op == OP_REC2) {
			/* survivors data 2..k-1, P and Q; outputs data 0 and 1 */
			for (int i = 0; i < k; i++)
				c.surv[s * (size_t)k + (size_t)i] = member(&c, s, i + 2);
			c.outs[s * 2] = member(&c, s, 0);
			c.outs[s * 2 + 1] = member(&c, s, 1);
		}
	}

	unsigned char *want[2] = { malloc(chunk), malloc(chunk) };
	if (op == OP_REC2) {
		unsigned char enc[(MAX_DATA + 2) * MAX_DATA], sub[MAX_DATA * MAX_DATA], inv[MAX_DATA * MAX_DATA];
		gf_gen_rs_matrix(enc, k + 2, k);
		/* survivors: data 2..k-1, P (row k), Q (row k+1) */
		for (int i = 0; i < k; i++)
			memcpy(sub + i * k, enc + (i + 2) * k, (size_t)k);
		if (gf_invert_matrix(sub, inv, k)) {
			fprintf(stderr, "isal_bench: recover2 %d+2: survivor matrix is singular\n", k);
			exit(1);
		}
		/* data 0 and 1 are rows 0 and 1 of the inverse */
		c.tables = malloc(32 * (size_t)k * 2);
		ec_init_tables(k, 2, inv, c.tables);
	}
	if (op == OP_REC1 || op == OP_REC2) {
		/* stripe 0 gets parity that agrees with its data; keep what must be rebuilt */
		reference_pq(&c, member(&c, 0, k), op == OP_REC2 ? member(&c, 0, k + 1) : NULL);
		memcpy(want[0], member(&c, 0, 0), chunk);
		memcpy(want[1], member(&c, 0, 1), chunk);
	} else {
		reference_pq(&c, want[0], op == OP_PQ ? want[1] : NULL);
	}

	verify(&c, want, "before timing");
	uint64_t per_call = (uint64_t)k * chunk;
	double results[runs];
	size_t i = 0;
	int rc = 0;
	double start = now();
	while (now() - start < seconds / 4)
		rc |= call(&c, i++ % c.stripes);
	for (int r = 0; r < runs; r++) {
		uint64_t calls = 0;
		double t0 = now(), e;
		for (;;) {
			rc |= call(&c, i++ % c.stripes);
			calls++;
			e = now() - t0;
			if (e >= seconds)
				break;
		}
		results[r] = (double)(calls * per_call) / e / 1e9;
	}
	if (rc) {
		fprintf(stderr, "isal_bench: %s: ISA-L refused a call while timing\n", op_names[op]);
		exit(1);
	}
	verify(&c, want, "after timing");

	double sorted[runs];
	memcpy(sorted, results, sizeof(sorted));
	qsort(sorted, (size_t)runs, sizeof(double), cmp_double);
	double median = runs % 2 ? sorted[runs / 2] : (sorted[runs / 2 - 1] + sorted[runs / 2]) / 2;
	printf("{\"op\":\"%s\",\"data_members\":%d,\"parity_members\":%d,\"chunk_bytes\":%zu,\"kernel\":\"isal\","
	       "\"working_set_bytes\":%zu,\"gbps\":%.3f,\"gbps_min\":%.3f,\"gbps_max\":%.3f,\"runs\":[",
	       op_names[op], k, op_parity(op), chunk, bytes, median, sorted[0], sorted[runs - 1]);
	for (int r = 0; r < runs; r++)
		printf("%s%.3f", r ? "," : "", results[r]);
	printf("]}\n");
	fflush(stdout);

	free(want[0]);
	free(want[1]);
	free(c.tables);
	free(c.vec);
	free(c.surv);
	free(c.outs);
	free(c.pool);
}

int main(int argc, char **argv)
{
	char ops_text[] = "xor,pq,recover1,recover2", chunk_text[] = "64K,1M", set_text[] = "hot,512M";
	char *ops_arg = ops_text, *layout_arg = NULL, *chunk_arg = chunk_text, *set_arg = set_text;
	int runs = 3;
	double seconds = 0.3;

	for (int a = 1; a < argc; a++) {
		char *name = argv[a], *value = NULL;
		if (!strcmp(name, "--json"))
			continue;
		char *eq = strchr(name, '=');
		if (eq) {
			*eq = 0;
			value = eq + 1;
		} else if (a + 1 < argc) {
			value = argv[++a];
		}
		if (!value)
			die("%s needs a value", name);
		if (!strcmp(name, "--op"))
			ops_arg = value;
		else if (!strcmp(name, "--layout"))
			layout_arg = value;
		else if (!strcmp(name, "--chunk"))
			chunk_arg = value;
		else if (!strcmp(name, "--working-set"))
			set_arg = value;
		else if (!strcmp(name, "--runs")) {
			char *end;
			long r = strtol(value, &end, 10);
			if (*end || r < 1 || r > 1000)
				die("--runs=%s: give a whole number from 1 to 1000", value);
			runs = (int)r;
		} else if (!strcmp(name, "--seconds")) {
			char *end;
			seconds = strtod(value, &end);
			if (*end || !(seconds > 0 && seconds <= 3600))
				die("--seconds=%s: give a positive number of seconds (at most 3600)", value);
		} else
			die("unknown option %s", name);
	}

	char *items[MAX_ITEMS];
	int ops[OP_COUNT], nops = 0;
	int n = split(ops_arg, items, "--op");
	for (int i = 0; i < n; i++) {
		int op = -1;
		for (int o = 0; o < OP_COUNT; o++)
			if (!strcmp(items[i], op_names[o]))
				op = o;
		if (op < 0)
			die("--op: unknown operation '%s' (choose from xor, pq, recover1, recover2)", items[i]);
		int seen = 0;
		for (int j = 0; j < nops; j++)
			seen |= ops[j] == op;
		if (!seen)
			ops[nops++] = op;
	}

	/* layouts: data members, and parity members or 0 for "any" */
	int ldata[MAX_ITEMS], lpar[MAX_ITEMS], nlayouts;
	if (layout_arg) {
		nlayouts = split(layout_arg, items, "--layout");
		for (int i = 0; i < nlayouts; i++) {
			char *end;
			long d = strtol(items[i], &end, 10), p = 0;
			if (end == items[i])
				die("--layout: '%s' is not a layout (write DATA+PARITY, like 4+1 or 8+2)", items[i]);
			if (*end == '+') {
				char *pstart = end + 1;
				p = strtol(pstart, &end, 10);
				if (end == pstart)
					die("--layout: '%s' is not a layout (write DATA+PARITY, like 4+1 or 8+2)", items[i]);
				if (p < 1 || p > 2)
					die("--layout: '%s': give 1 (xor, recover1) or 2 (pq, recover2) parity members", items[i]);
			}
			if (*end)
				die("--layout: '%s' is not a layout (write DATA+PARITY, like 4+1 or 8+2)", items[i]);
			if (d < MIN_DATA || d > MAX_DATA)
				die("--layout: '%s': give 2 to 64 data members", items[i]);
			ldata[i] = (int)d;
			lpar[i] = (int)p;
		}
	} else {
		nlayouts = 2;
		ldata[0] = 4, ldata[1] = 8, lpar[0] = lpar[1] = 0;
	}

	size_t chunks[MAX_ITEMS];
	int nchunks = split(chunk_arg, items, "--chunk");
	for (int i = 0; i < nchunks; i++) {
		unsigned long long b = parse_size(items[i], 1024);
		if (b == 0 || b % CHUNK_UNIT || b > MAX_CHUNK)
			die("--chunk: '%s': give a multiple of 4K up to 64M (a bare number is KiB)", items[i]);
		chunks[i] = (size_t)b;
	}

	unsigned long long sets[MAX_ITEMS]; /* 0 = hot */
	int nsets = split(set_arg, items, "--working-set");
	for (int i = 0; i < nsets; i++) {
		if (!strcasecmp(items[i], "hot")) {
			sets[i] = 0;
			continue;
		}
		sets[i] = parse_size(items[i], 1);
		if (sets[i] == 0 || sets[i] > (1ULL << 40))
			die("--working-set: '%s': give hot or a size from 1 byte to 1T", items[i]);
	}

	for (int o = 0; o < nops; o++) {
		int op = ops[o], any = 0;
		for (int l = 0; l < nlayouts; l++)
			any |= lpar[l] == 0 || lpar[l] == op_parity(op);
		if (!any)
			die("--layout: no DATA+PARITY layout with the parity count %s needs", op_names[op]);
	}
	for (int o = 0; o < nops; o++)
		for (int l = 0; l < nlayouts; l++) {
			if (lpar[l] != 0 && lpar[l] != op_parity(ops[o]))
				continue;
			int dup = 0;
			for (int m = 0; m < l; m++)
				dup |= ldata[m] == ldata[l] && (lpar[m] == 0 || lpar[m] == op_parity(ops[o]));
			if (dup)
				continue;
			for (int ch = 0; ch < nchunks; ch++)
				for (int s = 0; s < nsets; s++)
					bench(ops[o], ldata[l], chunks[ch], sets[s], runs, seconds);
		}
	return 0;
}
