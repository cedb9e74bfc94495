-- shardcast results store, schema version 3 (PRAGMA user_version).
-- One row per command run; its predictions and measurements as (key, value)
-- rows named after the JSON contract ("memory.peak_bytes", "step.time_s");
-- the full JSON output; a recommend run's candidates; and fitted calibrations.
-- Every statement is CREATE ... IF NOT EXISTS, so applying this file to a
-- database of an older version adds what that version lacks; a change that is
-- not an addition is a step of its own in store.c (version 3: runs.uuid, filled
-- for older runs from a hash of their content). Written by sim/drivers/store.c in one
-- transaction per run, in WAL mode, so a killed process leaves no partial run.
CREATE TABLE IF NOT EXISTS runs (
  id            INTEGER PRIMARY KEY,
  command       TEXT NOT NULL,          -- simulate | recommend | validate
  scenario_path TEXT,
  scenario_text TEXT,
  scenario_hash TEXT,                   -- FNV-1a 64 of the text and the --set overrides
  overrides     TEXT,                   -- the --set arguments, one per line
  version       TEXT NOT NULL,
  host          TEXT,
  device        TEXT,                   -- catalog GPU name or the measured device
  created_at    TEXT NOT NULL,          -- UTC, ISO 8601 with milliseconds
  uuid          TEXT                    -- version 3: the run's own id (RFC 9562 v4, random;
                                        -- v8 = derived for a run recorded before version 3);
                                        -- results merge skips a run whose id it already holds
);
CREATE TABLE IF NOT EXISTS predictions (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key    TEXT NOT NULL,
  value  REAL,
  PRIMARY KEY (run_id, key)
);
CREATE TABLE IF NOT EXISTS measurements (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key    TEXT NOT NULL,
  value  REAL,
  PRIMARY KEY (run_id, key)
);
CREATE TABLE IF NOT EXISTS outputs (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  format TEXT NOT NULL,                 -- json
  body   TEXT NOT NULL,
  PRIMARY KEY (run_id, format)
);
-- version 2: every candidate of a recommend run, one row per (cell, candidate)
CREATE TABLE IF NOT EXISTS candidates (
  run_id            INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  cell              INTEGER NOT NULL,   -- (model x seq_lens + seq_len) x batches + batch
  candidate         INTEGER NOT NULL,   -- index in the sweep's candidate list
  model             TEXT NOT NULL,
  model_params      REAL,
  seq_len           INTEGER,
  batch             INTEGER,            -- the cell's global batch or micro-batch; 0 = auto
  strategy          TEXT NOT NULL,      -- ddp | zero1..3 | fsdp:SHARDING | dp | single
  label             TEXT NOT NULL,      -- strategy and the options that vary in the sweep
  precision         TEXT,
  activation_checkpointing TEXT,
  offload           TEXT,
  tensor_parallel   INTEGER,
  nodes             INTEGER,
  gpus              INTEGER,
  status            TEXT NOT NULL,      -- ok | no_fit | indivisible | invalid
  rank              INTEGER,            -- 1 = the cell's best; NULL = not ranked
  micro_batch       INTEGER,
  grad_accum        INTEGER,
  global_batch      INTEGER,
  max_micro_batch   INTEGER,
  peak_bytes        REAL,               -- most loaded GPU (at micro-batch 1 when nothing fits)
  capacity_bytes    REAL,
  params_bytes      REAL,
  grads_bytes       REAL,
  optimizer_bytes   REAL,
  activations_bytes REAL,
  buffers_bytes     REAL,
  overhead_bytes    REAL,
  step_time_s       REAL,
  tokens_per_s      REAL,
  mfu               REAL,
  exposed_comm_s    REAL,
  gpu_hours_per_mtok REAL,
  train_days        REAL,               -- [job] work at this throughput (with [failures]: job model)
  ettr              REAL,               -- with [failures]: training time / wall time
  score             REAL,               -- the objective, larger is better
  note              TEXT,
  PRIMARY KEY (run_id, cell, candidate)
);
CREATE TABLE IF NOT EXISTS calibrations (
  id           INTEGER PRIMARY KEY,
  device       TEXT NOT NULL,
  created_at   TEXT NOT NULL,
  params_json  TEXT NOT NULL,           -- fitted parameters
  n_points     INTEGER NOT NULL,
  error_before REAL,                    -- median relative step-time error
  error_after  REAL
);
CREATE INDEX IF NOT EXISTS runs_hash ON runs(scenario_hash);
CREATE UNIQUE INDEX IF NOT EXISTS runs_uuid ON runs(uuid);
CREATE INDEX IF NOT EXISTS calibrations_device ON calibrations(device, id);
