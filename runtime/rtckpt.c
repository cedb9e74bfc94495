/*
 * rtckpt.c — sharded checkpoints of the runtime (see rtckpt.h).
 */
#include "rtckpt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAGIC "SCCKPT01"

struct ckpt_header {
	char magic[8];
	int32_t step, kind, world, rank, nunits, optimizer, nstates;
	int64_t params;            /* elements of the whole model */
};

enum { MAXBUF = 4096 };

/* Copies (to_host) or restores the persistent state between device 0 and buf;
 * returns its bytes (buf NULL: only counts). */
static size_t walk(struct strat *s, char *buf, int to_host)
{
	float *b[MAXBUF];
	size_t n[MAXBUF], off = 0;
	int k, nb = strat_state(s, b, n, MAXBUF);

	for (k = 0; k < nb; k++) {
		if (buf && to_host)
			s->be->copy(s->be, buf + off, b[k], n[k] * sizeof(float), COPY_D2H);
		else if (buf)
			s->be->copy(s->be, b[k], buf + off, n[k] * sizeof(float), COPY_H2D);
		off += n[k] * sizeof(float);
	}
	return off;
}

static void header(const struct strat *s, struct ckpt_header *h)
{
	memset(h, 0, sizeof *h);
	memcpy(h->magic, MAGIC, 8);
	h->step = s->step;
	h->kind = s->mech * 16 + s->sharding * 4 + s->zstage;
	h->world = s->world.size;
	h->rank = s->world.rank;
	h->nunits = s->m.nunits;
	h->optimizer = s->o.optimizer;
	h->nstates = s->ndev;
	h->params = (int64_t)s->m.nparams;
}

static int write_file(const char *path, const void *buf, size_t len, char *msg, size_t msglen)
{
	char tmp[700];
	FILE *f;
	int ok;

	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	f = fopen(tmp, "wb");
	if (!f) {
		snprintf(msg, msglen, "%s: cannot write: %s", tmp, strerror(errno));
		return ERR_SYSTEM;
	}
	ok = fwrite(buf, 1, len, f) == len;
	ok = (fflush(f) == 0) && ok;
	ok = (fclose(f) == 0) && ok;
	if (!ok || rename(tmp, path)) {
		snprintf(msg, msglen, "%s: write failed: %s", path, strerror(errno));
		remove(tmp);
		return ERR_SYSTEM;
	}
	return 0;
}

static void *writer(void *arg)
{
	struct rtckpt *c = arg;
	c->rc = write_file(c->path, c->buf, c->len, c->msg, sizeof c->msg);
	return NULL;
}

static int finish(struct rtckpt *c, struct strat *s, struct err *e)
{
	double v = c->rc != 0;
	int rc;

	free(c->buf);
	c->buf = NULL;
	if (c->rc)
		err_set(e, c->rc, NULL, 0, "%s", c->msg);
	rc = s->be->allreduce_host(s->be, &s->world, &v, 1, 1, e);
	if (rc || v)
		return rc ? rc : c->rc ? c->rc : err_set(e, ERR_SYSTEM, NULL, 0, "a rank failed to write its checkpoint");
	if (s->world.rank == 0) {
		char path[600], text[256], msg[1024];
		int n = snprintf(text, sizeof text, "shardcast checkpoint 1\nstep %d\nworld %d\nkind %d\n"
				 "params %zu\nfiles rank-%%05d.bin\n", s->step, s->world.size, s->mech,
				 s->m.nparams);
		snprintf(path, sizeof path, "%s/manifest.txt", c->dir);
		if (write_file(path, text, (size_t)n, msg, sizeof msg))
			return err_set(e, ERR_SYSTEM, NULL, 0, "%s", msg);
	}
	return s->be->barrier(s->be, &s->world, e);
}

int rtckpt_wait(struct rtckpt *c, struct strat *s, struct err *e)
{
	if (!c->active)
		return 0;
	pthread_join(c->th, NULL);
	c->active = 0;
	return finish(c, s, e);
}

int rtckpt_save(struct rtckpt *c, struct strat *s, const char *dir, int async, struct err *e)
{
	struct ckpt_header h;
	char manifest[600];
	int rc = rtckpt_wait(c, s, e);

	if (rc)
		return rc;
	snprintf(c->dir, sizeof c->dir, "%s", dir);
	if (mkdir(dir, 0777) && errno != EEXIST)
		return err_set(e, ERR_INPUT, dir, 0, "cannot create the checkpoint directory: %s", strerror(errno));
	snprintf(manifest, sizeof manifest, "%s/manifest.txt", dir);
	if (s->world.rank == 0)
		remove(manifest);  /* incomplete until this save's manifest is written */
	header(s, &h);
	c->len = sizeof h + walk(s, NULL, 1);
	c->buf = malloc(c->len);
	if (!c->buf)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory staging a checkpoint of %zu bytes", c->len);
	memcpy(c->buf, &h, sizeof h);
	walk(s, (char *)c->buf + sizeof h, 1);
	snprintf(c->path, sizeof c->path, "%s/rank-%05d.bin", dir, s->world.rank);
	c->rc = 0;
	if (async && pthread_create(&c->th, NULL, writer, c) == 0) {
		c->active = 1;
		return 0;
	}
	writer(c);
	return finish(c, s, e);
}

int rtckpt_load(struct strat *s, const char *dir, struct err *e)
{
	struct ckpt_header h, want;
	char path[600], line[128];
	size_t len;
	char *buf;
	FILE *f;
	int ok;

	snprintf(path, sizeof path, "%s/manifest.txt", dir);
	f = fopen(path, "r");
	if (!f)
		return err_set(e, ERR_INPUT, path, 0, "no manifest: not a complete checkpoint (%s)", strerror(errno));
	ok = fgets(line, sizeof line, f) && strcmp(line, "shardcast checkpoint 1\n") == 0;
	fclose(f);
	if (!ok)
		return err_set(e, ERR_INPUT, path, 1, "not a shardcast checkpoint manifest");
	snprintf(path, sizeof path, "%s/rank-%05d.bin", dir, s->world.rank);
	f = fopen(path, "rb");
	if (!f)
		return err_set(e, ERR_INPUT, path, 0, "cannot open: %s", strerror(errno));
	header(s, &want);
	len = walk(s, NULL, 1);
	buf = malloc(len + 1);
	ok = buf && fread(&h, sizeof h, 1, f) == 1;
	if (ok && (memcmp(h.magic, MAGIC, 8) || h.kind != want.kind || h.world != want.world ||
		   h.rank != want.rank || h.nunits != want.nunits || h.optimizer != want.optimizer ||
		   h.params != want.params)) {
		fclose(f);
		free(buf);
		return err_set(e, ERR_INPUT, path, 0, "checkpoint of another strategy, world, model or optimizer");
	}
	ok = ok && fread(buf, 1, len, f) == len && fgetc(f) == EOF;
	fclose(f);
	if (!ok) {
		free(buf);
		return err_set(e, ERR_INPUT, path, 0, "truncated or oversized checkpoint file");
	}
	walk(s, buf, 0);
	free(buf);
	s->step = h.step;
	s->opt_steps = h.step;  /* fp16's skipped steps are not kept: Adam's t restarts at the step */
	return 0;
}
