-- shardcast results store, schema version 1 (PRAGMA user_version).
-- One row per command run; its predictions and measurements as (key, value)
-- rows named after the JSON contract ("memory.peak_bytes", "step.time_s");
-- the full JSON output; and fitted calibrations. Written by sim/store.c in one
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
  created_at    TEXT NOT NULL           -- UTC, ISO 8601 with milliseconds
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
CREATE INDEX IF NOT EXISTS calibrations_device ON calibrations(device, id);
