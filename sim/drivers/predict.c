/*
 * predict.c — runs the simulator's models for one scenario (see predict.h).
 */
#include "predict.h"

#include <string.h>

#include "graph.h"
#include "jobrun.h"
#include "memory.h"
#include "step.h"

int predict_graph_opts(const struct scenario *s, struct graph_opts *o)
{
	const struct scn_training *t = &s->s.training;

	memset(o, 0, sizeof *o);
	o->seq_len = s->seq_len;
	o->target_len = s->target_len;
	o->dropout = s->dropout;
	o->tp = (int)t->tensor_parallel;
	o->flavor = s->plan.engine == FW_SHARDCAST ? GRAPH_SHARDCAST : GRAPH_EAGER;
	o->act_bytes = scenario_act_bytes(s);
	o->attn = s->attn;
	/* PyTorch mixed precision is autocast over fp32 weights (plan.h) */
	o->autocast = s->plan.autocast;
	o->fwv = s->plan.engine == FW_PYTORCH ? s->s.training.framework_version : FWV_CURRENT;
	/* transformers turns use_cache off in checkpointed layers */
	o->kv_cache = s->s.training.recompute != RECOMPUTE_FULL;
	return 0;
}

int predict_run(const struct scenario *s, struct prediction *p, struct err *e)
{
	struct graph g;
	struct graph_opts o;
	int rc;

	memset(p, 0, sizeof *p);
	p->max_micro_batch = -1;
	predict_graph_opts(s, &o);
	rc = graph_build(&g, &s->model, &o, e);
	if (rc) {
		graph_free(&g);
		return rc;
	}
	p->params = g.params;
	p->params_backbone = g.params_backbone;
	p->flops_per_token = graph_model_flops_per_sample(&g, &s->model) / g.tokens;
	p->micro_batch = s->s.training.micro_batch > 0 ? s->s.training.micro_batch : 0;
	/* memory first: it settles the micro-batch the step time is simulated at */
	rc = mem_predict(s, &g, p, e);
	if (!rc)
		rc = step_run(s, &g, p, e);
	/* when not even one sample fits and the scenario names no micro-batch,
	 * the configuration cannot run: reports give no step time or throughput.
	 * A micro-batch the scenario names is timed, and said not to fit when it
	 * does not (a memory model that overestimates must not hide the
	 * throughput of a configuration that ran for real) */
	p->step.timed = !p->mem.valid || p->max_micro_batch != 0 || s->s.training.micro_batch > 0;
	graph_free(&g);
	/* the job model needs the step time: [job] step_time or the step model's */
	if (!rc && s->has_failures)
		rc = jobrun_predict(s, p, e);
	return rc;
}

int predict_memory_timeline(const struct scenario *s, int64_t micro_batch, const char *path,
			    struct err *e)
{
	struct graph g;
	struct graph_opts o;
	int rc;

	predict_graph_opts(s, &o);
	rc = graph_build(&g, &s->model, &o, e);
	if (!rc)
		rc = mem_timeline_csv(s, &g, micro_batch, path, e);
	graph_free(&g);
	return rc;
}
