-- Runs published from run folders (the folders stay the source of truth).
CREATE TABLE runs (
    run_id         text PRIMARY KEY,
    folder         text NOT NULL,
    suite          text NOT NULL,
    started_at     timestamptz NOT NULL,
    ended_at       timestamptz,
    status         text NOT NULL,
    pipeline_file  text NOT NULL,
    git_commit     text,
    git_dirty      boolean,
    runner_version text NOT NULL,
    host           text NOT NULL,
    -- sha256 of results.json as published: same id, same hash = already there.
    content_sha256 text NOT NULL,
    -- The results.json text, byte for byte (history --db parses it back),
    -- and as JSONB for ad-hoc queries.
    results_text   text NOT NULL,
    results        jsonb NOT NULL,
    published_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE stage_instances (
    run_id            text NOT NULL REFERENCES runs ON DELETE CASCADE,
    instance_id       text NOT NULL,
    stage             text NOT NULL,
    plugin            text NOT NULL,
    status            text NOT NULL,
    started_at        timestamptz,
    duration_s        double precision,
    cluster_not_clean boolean NOT NULL,
    host_limited      boolean NOT NULL,
    PRIMARY KEY (run_id, instance_id)
);

CREATE TABLE metrics (
    run_id      text NOT NULL,
    instance_id text NOT NULL,
    stage       text NOT NULL,
    metric      text NOT NULL,
    value       double precision NOT NULL,
    unit        text NOT NULL,
    direction   text NOT NULL,
    -- Labels without the repetition label, which is its own column.
    labels      jsonb NOT NULL,
    repetition  integer,
    headline    boolean NOT NULL,
    FOREIGN KEY (run_id, instance_id) REFERENCES stage_instances ON DELETE CASCADE
);
CREATE INDEX metrics_metric ON metrics (metric, stage);

-- Each `series: NAME` artifact's file (stages/<folder>/series-*.json) as
-- found in the run folder: {"unit": ..., "points": [[t, v], ...]}.
CREATE TABLE series (
    run_id      text NOT NULL,
    instance_id text NOT NULL,
    name        text NOT NULL,
    path        text NOT NULL,
    points      jsonb NOT NULL,
    PRIMARY KEY (run_id, instance_id, path),
    FOREIGN KEY (run_id, instance_id) REFERENCES stage_instances ON DELETE CASCADE
);

-- The run's own comparison gate (results.json `comparison.regressions`):
-- a row is a gated metric that was worse past its threshold.
CREATE TABLE regressions (
    run_id          text NOT NULL REFERENCES runs ON DELETE CASCADE,
    baseline        text NOT NULL,
    stage           text NOT NULL,
    metric          text NOT NULL,
    labels          jsonb NOT NULL,
    unit            text NOT NULL,
    baseline_value  double precision NOT NULL,
    value           double precision NOT NULL,
    change_percent  double precision,
    threshold_percent double precision NOT NULL
);
