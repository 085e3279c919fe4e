//! Plugins shared through an OCI registry, end to end against a real one
//! (Debian's `docker-registry` on 127.0.0.1, started per test by
//! common/registry.rs), with `skopeo` and raw registry API calls (curl) as
//! the independent clients.

mod common;

use pipeline_test_tiers::{Tier, live};

use std::path::{Path, PathBuf};
use std::process::Output;

use common::registry::{Registry, sha256};
use common::{pipeline_command, results, root, stage, temp_dir};

/// The committed test component (describes itself as `testkit`).
fn testkit() -> Vec<u8> {
    std::fs::read(root().join("runner/wasm/tests/fixtures/testkit-0.1.0.wasm")).unwrap()
}

/// The same component with a custom section appended: other bytes, same plugin.
fn testkit_v2() -> Vec<u8> {
    let mut bytes = testkit();
    let name = b"pipeline-test";
    let mut body = vec![name.len() as u8];
    body.extend_from_slice(name);
    body.extend_from_slice(b"v2");
    bytes.push(0);
    bytes.push(body.len() as u8);
    bytes.extend_from_slice(&body);
    bytes
}

/// One team's machine: a work folder, its own plugin cache and docker
/// config, and nothing from the real user's environment.
struct Team {
    dir: PathBuf,
    cache: PathBuf,
    env: Vec<(String, String)>,
}

impl Team {
    fn new(name: &str) -> Team {
        let dir = temp_dir(&format!("oci-{name}"));
        let team = Team {
            cache: dir.join("cache"),
            dir,
            env: Vec::new(),
        };
        std::fs::create_dir_all(team.dir.join("docker")).unwrap();
        std::fs::write(team.dir.join("testkit.wasm"), testkit()).unwrap();
        std::fs::write(team.dir.join("testkit-v2.wasm"), testkit_v2()).unwrap();
        team
    }

    fn with_env(mut self, k: &str, v: &str) -> Team {
        self.env.push((k.into(), v.into()));
        self
    }

    fn pipeline(&self, args: &[&str]) -> Output {
        let mut cmd = pipeline_command(args);
        cmd.env("PIPELINE_CACHE_DIR", &self.cache)
            .env("DOCKER_CONFIG", self.dir.join("docker"))
            .env_remove("PIPELINE_REGISTRY_USER")
            .env_remove("PIPELINE_REGISTRY_PASSWORD")
            .env_remove("PIPELINE_REGISTRY_INSECURE")
            .env_remove("REGISTRY_AUTH_FILE")
            .env_remove("XDG_RUNTIME_DIR");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.output().expect("run pipeline")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.pipeline(args);
        assert!(
            out.status.success(),
            "pipeline {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// Exit code and stderr of a command expected to fail.
    fn fails(&self, args: &[&str]) -> (i32, String) {
        let out = self.pipeline(args);
        assert!(
            !out.status.success(),
            "pipeline {args:?} succeeded:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// `pipeline plugins push FILE REF`; the manifest digest it printed.
    fn push(&self, file: &str, reference: &str) -> String {
        let out = self.ok(&["plugins", "push", &self.path(file), reference]);
        printed_digest(&out, "manifest")
    }

    /// A suite whose stages run `testkit` (mode ok) from these references.
    fn suite(&self, references: &[&str]) -> String {
        let mut yaml = String::from("name: from-registry\nstages:\n");
        for (i, r) in references.iter().enumerate() {
            yaml.push_str(&format!(
                "  - id: kit{i}\n    uses: {r}\n    with: {{mode: ok}}\n"
            ));
        }
        std::fs::write(self.dir.join("suite.yaml"), yaml).unwrap();
        self.path("suite.yaml")
    }

    fn run(&self, extra: &[&str], out: &str) -> serde_json::Value {
        let suite = self.path("suite.yaml");
        let out_dir = self.path(out);
        let mut args = vec!["run", suite.as_str(), "--out", out_dir.as_str()];
        args.extend_from_slice(extra);
        self.ok(&args);
        results(Path::new(&out_dir)).expect("results.json")
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The digest on the line `  WHAT sha256:…` of push/pull output.
fn printed_digest(out: &str, what: &str) -> String {
    out.lines()
        .find_map(|l| l.trim().strip_prefix(what))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no `{what}` line in:\n{out}"))
        .to_string()
}

fn skopeo(args: &[&str]) -> Vec<u8> {
    let out = std::process::Command::new("skopeo")
        .args(args)
        .output()
        .expect("skopeo (scripts/install-deps.sh installs it)");
    assert!(
        out.status.success(),
        "skopeo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn a_pushed_plugin_is_read_by_skopeo_and_runs_from_the_registry() {
    let registry = Registry::start("push");
    let team = Team::new("push");
    let reference = registry.reference("team/testkit:1.0");
    let manifest = team.push("testkit.wasm", &reference);
    let wasm = sha256(&testkit());

    // An independent client reads what we pushed in the wasm OCI layout.
    let docker = format!("docker://{}/team/testkit:1.0", registry.addr);
    let raw = skopeo(&["inspect", "--raw", "--tls-verify=false", &docker]);
    assert_eq!(
        sha256(&raw),
        manifest,
        "the printed digest is the manifest's"
    );
    let m: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(
        m["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(m["layers"].as_array().unwrap().len(), 1);
    assert_eq!(m["layers"][0]["mediaType"], "application/wasm");
    assert_eq!(m["layers"][0]["digest"], wasm.as_str());
    assert_eq!(
        m["annotations"]["org.opencontainers.image.title"],
        "testkit"
    );
    assert_eq!(
        m["annotations"]["dev.pipeline.plugin.interface"],
        "pipeline:stage/plugin@0.1.0"
    );
    let copied = team.dir.join("skopeo-copy");
    skopeo(&[
        "copy",
        "--src-tls-verify=false",
        &docker,
        &format!("dir:{}", copied.display()),
    ]);
    let layer = std::fs::read(copied.join(wasm.trim_start_matches("sha256:"))).unwrap();
    assert_eq!(layer, testkit(), "skopeo copies out the very bytes pushed");

    // A suite runs it from the registry, and the run records what it ran.
    team.suite(&[&reference]);
    let r = team.run(&[], "run");
    let s = stage(&r, "kit0");
    assert_eq!(s["status"], "succeeded", "{s:#}");
    assert_eq!(s["plugin"], "testkit");
    assert_eq!(s["plugin_file"], format!("{reference} ({manifest})"));
    assert_eq!(s["plugin_sha256"], wasm.as_str());

    // A tag is asked of the registry again; a digest that is cached is not.
    let pulled = team.ok(&["plugins", "pull", &reference]);
    assert_eq!(printed_digest(&pulled, "manifest"), manifest);
    assert_eq!(printed_digest(&pulled, "wasm"), wasm);
    let by_digest = registry.reference(&format!("team/testkit@{manifest}"));
    let pulled = team.ok(&["plugins", "pull", &by_digest]);
    assert!(pulled.contains("already cached"), "{pulled}");
    let list = team.ok(&["plugins", "list"]);
    assert!(
        list.contains(&reference) && list.contains(&manifest),
        "{list}"
    );
    let described = team.ok(&["plugins", "describe", &reference]);
    assert!(
        described.starts_with(&format!(
            "testkit 0.1.0 (WebAssembly plugin: {reference} ({manifest}))"
        )),
        "{described}"
    );
    assert!(
        described.contains(&format!("sha256: {}", wasm.trim_start_matches("sha256:"))),
        "{described}"
    );
}

fn locked_runs_need_a_current_lock() {
    let registry = Registry::start("lock");
    let team = Team::new("lock");
    let one = registry.reference("team/testkit:1.0");
    let two = registry.reference("team/testkit:2.0");
    let m1 = team.push("testkit.wasm", &one);
    let m2 = team.push("testkit-v2.wasm", &two);
    let suite = team.suite(&[&one]);
    let lock_file = team.dir.join("suite.lock");

    let (code, err) = team.fails(&["run", &suite, "--locked"]);
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!(
            "--locked: there is no lock file {}",
            lock_file.display()
        )),
        "{err}"
    );

    let out = team.ok(&["lock", &suite]);
    assert!(out.contains(&format!("locked  {one} {m1}")), "{out}");
    let lock = std::fs::read_to_string(&lock_file).unwrap();
    assert!(
        lock.contains(&m1) && lock.contains(&sha256(&testkit())),
        "{lock}"
    );
    let r = team.run(&["--locked"], "run1");
    assert_eq!(stage(&r, "kit0")["status"], "succeeded");
    assert_eq!(
        std::fs::read_to_string(team.dir.join("run1/pipeline.lock")).unwrap(),
        lock,
        "the run folder keeps the lock it ran by"
    );

    // A reference the lock does not know: pointed at, with the fix.
    team.suite(&[&one, &two]);
    let (code, err) = team.fails(&["run", &suite, "--locked"]);
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!(
            "--locked: `{two}` is not in {}",
            lock_file.display()
        )),
        "{err}"
    );
    assert!(err.contains("suite.yaml:7:11"), "{err}");
    assert!(
        err.contains(&format!("run `pipeline lock {suite}`")),
        "{err}"
    );
    let out = team.ok(&["lock", &suite]);
    assert!(out.contains(&format!("kept    {one} {m1}")), "{out}");
    assert!(out.contains(&format!("locked  {two} {m2}")), "{out}");

    // A lock entry the suite no longer uses is stale too.
    team.suite(&[&one]);
    let (_, err) = team.fails(&["run", &suite, "--locked"]);
    assert!(
        err.contains(&format!(
            "is stale: it locks `{two}`, which the suite no longer uses"
        )),
        "{err}"
    );
    let out = team.ok(&["lock", &suite]);
    assert!(out.contains(&format!("removed {two}")), "{out}");
    team.ok(&["validate", "--locked", &suite]);
}

fn a_re_pushed_tag_does_not_change_a_locked_run() {
    let mut registry = Registry::start("repush");
    let team = Team::new("repush");
    let reference = registry.reference("team/testkit:1.0");
    let m1 = team.push("testkit.wasm", &reference);
    let suite = team.suite(&[&reference]);
    team.ok(&["lock", &suite]);
    let locked = std::fs::read_to_string(team.dir.join("suite.lock")).unwrap();

    // Someone re-pushes the tag with other bytes.
    let m2 = team.push("testkit-v2.wasm", &reference);
    assert_ne!(m1, m2);

    // Another machine (an empty cache) runs the locked bytes, not the tag's.
    let fresh = Team::new("repush-fresh");
    std::fs::copy(team.dir.join("suite.yaml"), fresh.dir.join("suite.yaml")).unwrap();
    std::fs::write(fresh.dir.join("suite.lock"), &locked).unwrap();
    let r = fresh.run(&["--locked"], "run");
    let s = stage(&r, "kit0");
    assert_eq!(s["plugin_sha256"], sha256(&testkit()).as_str());
    assert_eq!(s["plugin_file"], format!("{reference} ({m1})"));
    // Unlocked, the tag's new bytes run.
    let unlocked = Team::new("repush-unlocked");
    unlocked.suite(&[&reference]);
    let r = unlocked.run(&[], "run");
    assert_eq!(
        stage(&r, "kit0")["plugin_sha256"],
        sha256(&testkit_v2()).as_str()
    );

    // `lock` keeps the entry; `lock --update` takes the new digest.
    let out = team.ok(&["lock", &suite]);
    assert!(out.contains(&format!("kept    {reference} {m1}")), "{out}");
    let out = team.ok(&["lock", "--update", &suite]);
    assert!(out.contains(&format!("updated {reference} {m2}")), "{out}");
    std::fs::write(team.dir.join("suite.lock"), &locked).unwrap();

    // The locked manifest deleted from the registry: refused, naming the
    // reference, the locked digest and what the tag has now.
    let repository = "team/testkit";
    registry.delete_manifest(repository, &m1);
    let gone = Team::new("repush-gone");
    std::fs::copy(team.dir.join("suite.yaml"), gone.dir.join("suite.yaml")).unwrap();
    std::fs::write(gone.dir.join("suite.lock"), &locked).unwrap();
    let (code, err) = gone.fails(&["run", &gone.path("suite.yaml"), "--locked"]);
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!(
            "cannot load plugin `{reference}`: the lock pins {m1}, which the registry no longer has (the tag now points at {m2}); refusing to run other bytes"
        )),
        "{err}"
    );
    assert!(!gone.dir.join("run").exists());
    registry.stop();
}

fn a_locked_and_pulled_suite_runs_with_the_registry_stopped() {
    let mut registry = Registry::start("offline");
    let team = Team::new("offline");
    let reference = registry.reference("team/testkit:1.0");
    team.push("testkit.wasm", &reference);
    let suite = team.suite(&[&reference]);
    team.ok(&["lock", &suite]);
    registry.stop();
    assert_eq!(
        registry.get_status("/v2/"),
        None,
        "nothing listens any more"
    );

    let r = team.run(&["--locked"], "run");
    assert_eq!(stage(&r, "kit0")["status"], "succeeded");

    // Without the lock the tag must be resolved, and that needs the registry.
    std::fs::remove_file(team.dir.join("suite.lock")).unwrap();
    let (code, err) = team.fails(&["validate", &suite]);
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!("registry {} is unreachable", registry.addr)),
        "{err}"
    );
    assert!(err.contains("Connection refused"), "{err}");
    assert!(err.contains("runs without it"), "{err}");
}

fn registry_errors_each_get_one_clear_message() {
    let registry = Registry::start("errors");
    let team = Team::new("errors");

    // A tag that does not exist.
    let missing = registry.reference("team/nothing:1.0");
    let (code, err) = team.fails(&["plugins", "pull", &missing]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("{missing}: the tag `1.0` is not in the registry")),
        "{err}"
    );
    let suite = team.suite(&[&missing]);
    let (_, err) = team.fails(&["validate", &suite]);
    assert!(err.contains("suite.yaml:4:11"), "{err}");
    assert!(
        err.contains(&format!(
            "cannot load plugin `{missing}`: the tag `1.0` is not in the registry"
        )),
        "{err}"
    );

    // An image, not a component, pushed with the registry API.
    let config = registry.upload_blob(
        "team/image",
        br#"{"architecture":"amd64","os":"linux"}"#,
        &team.dir,
    );
    let layer = registry.upload_blob("team/image", b"not a tar, not wasm", &team.dir);
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{config}","size":37}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{layer}","size":19}}]}}"#
    );
    registry.put_manifest("team/image", "1.0", &manifest, &team.dir);
    let image = registry.reference("team/image:1.0");
    let (_, err) = team.fails(&["plugins", "pull", &image]);
    assert!(
        err.contains(&format!("{image} is not a WASM component: its config is `application/vnd.oci.image.config.v1+json` and its layers are [application/vnd.oci.image.layer.v1.tar+gzip]")),
        "{err}"
    );

    // A blob whose bytes on the registry's disk were changed.
    let reference = registry.reference("team/testkit:1.0");
    team.push("testkit.wasm", &reference);
    let wasm = sha256(&testkit());
    let mut bytes = std::fs::read(registry.blob_file(&wasm)).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(registry.blob_file(&wasm), &bytes).unwrap();
    let (code, err) = team.fails(&["plugins", "pull", &reference]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("{reference}: the plugin blob has digest"))
            && err.contains(&format!("expected {wasm}; refusing it")),
        "{err}"
    );
    assert!(
        !team.cache.join("oci/blobs").exists()
            || std::fs::read_dir(team.cache.join("oci/blobs/sha256"))
                .map(|d| d.count())
                .unwrap_or(0)
                == 0,
        "nothing corrupt is cached"
    );

    // Nothing listening.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let nowhere = format!("oci://127.0.0.1:{closed}/team/testkit:1.0");
    let (code, err) = team.fails(&["plugins", "pull", &nowhere]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("registry 127.0.0.1:{closed} is unreachable")),
        "{err}"
    );
    assert!(err.contains("Connection refused"), "{err}");

    // A push of a file that is not a component sends nothing.
    std::fs::write(team.dir.join("not.wasm"), b"hello").unwrap();
    let (code, err) = team.fails(&[
        "plugins",
        "push",
        &team.path("not.wasm"),
        &registry.reference("team/not:1.0"),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot push"), "{err}");
    assert_eq!(registry.get_status("/v2/team/not/tags/list"), Some(404));
}

fn credentials_come_from_the_environment_or_the_docker_config_and_never_show() {
    const PASSWORD: &str = "pw-Zq81-never-printed";
    let registry = Registry::start_with_user("auth", "alice", PASSWORD);
    let reference = registry.reference("team/testkit:1.0");
    let anonymous = Team::new("auth-anon");
    let (code, err) = anonymous.fails(&[
        "plugins",
        "push",
        &anonymous.path("testkit.wasm"),
        &reference,
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!(
            "registry {} refused access (401 Unauthorized) with no credentials",
            registry.addr
        )),
        "{err}"
    );
    assert!(err.contains("PIPELINE_REGISTRY_USER"), "{err}");

    let wrong = Team::new("auth-wrong")
        .with_env("PIPELINE_REGISTRY_USER", "alice")
        .with_env("PIPELINE_REGISTRY_PASSWORD", "wrong-Xy7-secret");
    let (_, err) = wrong.fails(&["plugins", "push", &wrong.path("testkit.wasm"), &reference]);
    assert!(
        err.contains("with the PIPELINE_REGISTRY_USER/PIPELINE_REGISTRY_PASSWORD credentials"),
        "{err}"
    );
    assert!(!err.contains("wrong-Xy7-secret"), "{err}");

    let publisher = Team::new("auth-env")
        .with_env("PIPELINE_REGISTRY_USER", "alice")
        .with_env("PIPELINE_REGISTRY_PASSWORD", PASSWORD);
    let out = publisher.ok(&[
        "plugins",
        "push",
        &publisher.path("testkit.wasm"),
        &reference,
    ]);
    assert!(!out.contains(PASSWORD));

    // Another team logged in the docker way: ~/.docker/config.json `auths`.
    let user = Team::new("auth-docker");
    let token = {
        use std::io::Write;
        let mut child = std::process::Command::new("base64")
            .arg("-w0")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("alice:{PASSWORD}").as_bytes())
            .unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()
    };
    std::fs::write(
        user.dir.join("docker/config.json"),
        format!(
            r#"{{"auths":{{"http://{}":{{"auth":"{token}"}}}}}}"#,
            registry.addr
        ),
    )
    .unwrap();
    let suite = user.suite(&[&reference]);
    user.ok(&["lock", &suite]);
    let out = user.pipeline(&["run", &suite, "--locked", "--out", &user.path("run")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for text in [
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
        std::fs::read_to_string(user.dir.join("run/results.json")).unwrap(),
        std::fs::read_to_string(user.dir.join("run/report.md")).unwrap(),
        std::fs::read_to_string(user.dir.join("run/plan.txt")).unwrap(),
    ] {
        assert!(!text.contains(PASSWORD) && !text.contains(&token));
    }
}

fn a_component_published_by_another_tool_runs() {
    // The wasm OCI layout written with the registry API by hand (curl), as
    // wkg or oras would publish it: no `pipeline plugins push` involved.
    let registry = Registry::start("foreign");
    let team = Team::new("foreign");
    let repository = "other-team/testkit";
    let wasm = registry.upload_blob(repository, &testkit(), &team.dir);
    let config_json = format!(
        r#"{{"architecture":"wasm","os":"wasip2","layerDigests":["{wasm}"],"component":{{"exports":["pipeline:stage/plugin@0.1.0"],"imports":[],"target":null}}}}"#
    );
    let config = registry.upload_blob(repository, config_json.as_bytes(), &team.dir);
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.wasm.config.v0+json","digest":"{config}","size":{}}},"layers":[{{"mediaType":"application/wasm","digest":"{wasm}","size":{}}}]}}"#,
        config_json.len(),
        testkit().len()
    );
    let digest = registry.put_manifest(repository, "0.1.0", &manifest, &team.dir);
    // By digest, straight in the suite: no lock needed to pin it.
    let reference = registry.reference(&format!("{repository}@{digest}"));
    team.suite(&[&reference]);
    let r = team.run(&[], "run");
    let s = stage(&r, "kit0");
    assert_eq!(s["status"], "succeeded", "{s:#}");
    assert_eq!(s["plugin_sha256"], wasm.as_str());
}

fn the_example_suite_runs_a_plugin_published_to_the_sandbox_registry() {
    // scripts/test.sh starts the sandbox, whose registry is on 127.0.0.1:5055.
    let registry = std::env::var("PIPELINE_SANDBOX_REGISTRY").expect(
        "PIPELINE_SANDBOX_REGISTRY is not set: run through scripts/test.sh, which starts the sandbox and its registry",
    );
    common::cluster::conf();
    let team = Team::new("example");
    let suite_text = std::fs::read_to_string(root().join("pipelines/shared-plugin.yaml")).unwrap();
    let reference = format!("oci://{registry}/storage-team/ceph-df:0.1.0");
    assert!(
        suite_text.contains(&reference),
        "the example uses the sandbox registry"
    );
    std::fs::write(team.dir.join("suite.yaml"), &suite_text).unwrap();
    let plugin = root().join("plugins/wasm/ceph-df.wasm");
    let manifest = printed_digest(
        &team.ok(&["plugins", "push", &plugin.display().to_string(), &reference]),
        "manifest",
    );
    let suite = team.path("suite.yaml");
    let out = team.ok(&["lock", &suite]);
    assert!(
        out.contains(&format!("locked  {reference} {manifest}")),
        "{out}"
    );
    let r = team.run(&["--locked"], "run");
    let s = stage(&r, "capacity");
    assert_eq!(s["status"], "succeeded", "{s:#}");
    assert_eq!(s["plugin"], "ceph-df");
    assert_eq!(
        s["plugin_sha256"],
        sha256(&std::fs::read(&plugin).unwrap()).as_str()
    );
    assert!(
        s["metrics"].as_array().is_some_and(|m| !m.is_empty()),
        "ceph-df measured the cluster: {s:#}"
    );
}

fn bytes_that_do_not_match_the_lock_or_the_cache_are_never_run() {
    let mut registry = Registry::start("tamper");
    let team = Team::new("tamper");
    let reference = registry.reference("team/testkit:1.0");
    team.push("testkit.wasm", &reference);
    let suite = team.suite(&[&reference]);
    team.ok(&["lock", &suite]);
    let lock_file = team.dir.join("suite.lock");
    let locked = std::fs::read_to_string(&lock_file).unwrap();
    let wasm = sha256(&testkit());

    // A lock whose plugin digest was edited: refused, naming both digests.
    let forged = format!("sha256:{}", "0".repeat(64));
    std::fs::write(&lock_file, locked.replace(&wasm, &forged)).unwrap();
    let (code, err) = team.fails(&["run", &suite, "--locked"]);
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!(
            "cannot load plugin `{reference}`: the plugin (as locked) has digest {wasm}, expected {forged}; refusing it"
        )),
        "{err}"
    );
    std::fs::write(&lock_file, &locked).unwrap();

    // A cached plugin changed on disk is not run: it is fetched again...
    let cached = team
        .cache
        .join("oci/blobs/sha256")
        .join(format!("{}.wasm", wasm.trim_start_matches("sha256:")));
    let mut bytes = std::fs::read(&cached).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&cached, &bytes).unwrap();
    let r = team.run(&["--locked"], "run");
    assert_eq!(stage(&r, "kit0")["plugin_sha256"], wasm.as_str());
    assert_eq!(
        std::fs::read(&cached).unwrap(),
        testkit(),
        "the cache was mended"
    );

    // ...and without the registry, refused rather than run.
    std::fs::write(&cached, &bytes).unwrap();
    registry.stop();
    let (code, err) = team.fails(&["run", &suite, "--locked"]);
    assert_eq!(code, 2);
    assert!(err.contains("is unreachable"), "{err}");
    assert!(!team.dir.join("run2").exists());
}

fn a_hostile_manifest_is_refused_before_its_blob_is_read() {
    let registry = Registry::start("hostile");
    let team = Team::new("hostile");
    let repository = "evil/plugin";
    let wasm = registry.upload_blob(repository, &testkit(), &team.dir);
    let config = registry.upload_blob(repository, b"{}", &team.dir);
    // The layer claims 3 GiB, and its title carries terminal escapes.
    let manifest = |size: u64| {
        format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.wasm.config.v0+json","digest":"{config}","size":2}},"layers":[{{"mediaType":"application/wasm","digest":"{wasm}","size":{size},"annotations":{{"org.opencontainers.image.title":"\u001b[2J\u001b]0;pwned\u0007evil.wasm"}}}}]}}"#
        )
    };
    registry.put_manifest(repository, "huge", &manifest(3 << 30), &team.dir);
    let (code, err) = team.fails(&["plugins", "pull", &registry.reference("evil/plugin:huge")]);
    assert_eq!(code, 1);
    assert!(
        err.contains("its layer is 3221225472 bytes; a plugin is at most 67108864"),
        "{err}"
    );

    registry.put_manifest(
        repository,
        "1.0",
        &manifest(testkit().len() as u64),
        &team.dir,
    );
    team.ok(&["plugins", "pull", &registry.reference("evil/plugin:1.0")]);
    let out = team.pipeline(&["plugins", "list"]);
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(
        list.contains(&registry.reference("evil/plugin:1.0")),
        "{list}"
    );
    assert!(
        !list.contains('\u{1b}') && !list.contains('\u{7}'),
        "no escape reaches the terminal: {list:?}"
    );
}

fn main() {
    pipeline_test_tiers::run(vec![
        live(
            "a_pushed_plugin_is_read_by_skopeo_and_runs_from_the_registry",
            &[Tier::Registry],
            a_pushed_plugin_is_read_by_skopeo_and_runs_from_the_registry,
        ),
        live(
            "locked_runs_need_a_current_lock",
            &[Tier::Registry],
            locked_runs_need_a_current_lock,
        ),
        live(
            "a_re_pushed_tag_does_not_change_a_locked_run",
            &[Tier::Registry],
            a_re_pushed_tag_does_not_change_a_locked_run,
        ),
        live(
            "a_locked_and_pulled_suite_runs_with_the_registry_stopped",
            &[Tier::Registry],
            a_locked_and_pulled_suite_runs_with_the_registry_stopped,
        ),
        live(
            "registry_errors_each_get_one_clear_message",
            &[Tier::Registry],
            registry_errors_each_get_one_clear_message,
        ),
        live(
            "credentials_come_from_the_environment_or_the_docker_config_and_never_show",
            &[Tier::Registry],
            credentials_come_from_the_environment_or_the_docker_config_and_never_show,
        ),
        live(
            "a_component_published_by_another_tool_runs",
            &[Tier::Registry],
            a_component_published_by_another_tool_runs,
        ),
        live(
            "the_example_suite_runs_a_plugin_published_to_the_sandbox_registry",
            &[Tier::Registry, Tier::Cluster],
            the_example_suite_runs_a_plugin_published_to_the_sandbox_registry,
        ),
        live(
            "bytes_that_do_not_match_the_lock_or_the_cache_are_never_run",
            &[Tier::Registry],
            bytes_that_do_not_match_the_lock_or_the_cache_are_never_run,
        ),
        live(
            "a_hostile_manifest_is_refused_before_its_blob_is_read",
            &[Tier::Registry],
            a_hostile_manifest_is_refused_before_its_blob_is_read,
        ),
    ]);
}
