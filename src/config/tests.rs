use super::*;

#[test]
fn empty_file_gives_defaults() {
    let config = Config::from_toml("t.toml", "").unwrap();
    assert_eq!(config.listen.transport, ListenTransport::Stdio);
    assert_eq!(config.listen.address.to_string(), "127.0.0.1:8080");
    assert_eq!(config.hooks.tools_call, ToolsCallHooks::Both);
    assert_eq!(config.limits.max_message_bytes, 16 * 1024 * 1024);
}

#[test]
fn unknown_key_is_named() {
    let err = Config::from_toml("t.toml", "[audit]\npaht = \"x\"\n").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("paht"), "{text}");
    assert!(text.contains("t.toml"), "{text}");
}

#[test]
fn unknown_section_is_named() {
    let err = Config::from_toml("t.toml", "[gaurdian]\nmode = \"embedded\"\n").unwrap_err();
    assert!(err.to_string().contains("gaurdian"), "{err}");
}

#[test]
fn upstream_needs_a_command() {
    let err = Config::from_toml("t.toml", "[[upstream]]\nname = \"x\"\n").unwrap_err();
    assert!(err.to_string().contains("command"), "{err}");
}

#[test]
fn share_is_for_spawned_servers() {
    let config = Config::from_toml(
        "t.toml",
        "[[upstream]]\ncommand = [\"srv\"]\nshare = true\n",
    )
    .unwrap();
    assert!(config.upstreams[0].share);
    let err = Config::from_toml(
        "t.toml",
        "[[upstream]]\nurl = \"http://127.0.0.1:1/mcp\"\nshare = true\n",
    )
    .unwrap_err();
    assert!(err.to_string().contains("share"), "{err}");
}

#[test]
fn remote_guardian_needs_an_endpoint_and_a_secret() {
    let err = Config::from_toml("t.toml", "[guardian]\nmode = \"remote\"\n").unwrap_err();
    assert!(err.to_string().contains("url"), "{err}");
    let err = Config::from_toml(
        "t.toml",
        "[guardian]\nmode = \"remote\"\nurl = \"http://127.0.0.1:1/acs\"\n",
    )
    .unwrap_err();
    assert!(err.to_string().contains("secret"), "{err}");
    let config = Config::from_toml(
        "t.toml",
        "[guardian]\nmode = \"remote\"\nurl = \"http://127.0.0.1:1/acs\"\nsecret_env = \"S\"\non_decision_failure = \"deny\"\n",
    )
    .unwrap();
    assert_eq!(
        config.guardian.on_decision_failure,
        Some(PostureSetting::Deny)
    );
}

/// Every path-valued setting, relative, on a network listener.
const RELATIVE_PATHS: &str = r#"
[listen]
transport = "http"
auth_tokens_file = "secrets/tokens"
tls_cert = "tls/cert.pem"
tls_key = "tls/key.pem"

[[upstream]]
name = "local"
command = ["bin/server", "data/seed.json"]
cwd = "work"

[[upstream]]
name = "bare"
command = ["npx", "-y", "pkg"]

[[upstream]]
name = "net"
url = "https://tools.internal/mcp"
ca_file = "upstream/ca.pem"
client_cert = "upstream/client.pem"
client_key = "upstream/client.key"

[guardian]
mode = "remote"
url = "https://guardian.internal/acs"
secret_file = "guardian/secret"
ca_file = "guardian/ca.pem"
client_cert = "guardian/client.pem"
client_key = "guardian/client.key"

[audit]
path = "logs/audit.jsonl"
"#;

fn load_in_temp_dir(text: &str) -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("proxy.toml");
    std::fs::write(&file, text).unwrap();
    let config = Config::load(&file).unwrap();
    (dir, config)
}

#[test]
fn load_resolves_every_relative_path_against_the_files_directory() {
    let (dir, config) = load_in_temp_dir(RELATIVE_PATHS);
    let settings = config.path_settings();
    assert_eq!(settings.len(), 14, "{settings:#?}");
    for setting in settings.iter().filter(|setting| !setting.on_path) {
        assert!(setting.path.starts_with(dir.path()), "{setting}");
    }
    let local = &config.upstreams[0];
    assert_eq!(
        local.command,
        [
            dir.path().join("bin/server").display().to_string(),
            "data/seed.json".to_owned()
        ]
    );
    assert_eq!(
        local.cwd.as_deref(),
        Some(dir.path().join("work").as_path())
    );
    assert_eq!(config.upstreams[1].command[0], "npx");
    assert_eq!(config.audit.path, dir.path().join("logs/audit.jsonl"));
    assert_eq!(
        config.guardian.secret_file.as_deref(),
        Some(dir.path().join("guardian/secret").as_path())
    );
    assert_eq!(
        config.listen.tls_key.as_deref(),
        Some(dir.path().join("tls/key.pem").as_path())
    );
}

#[test]
fn the_default_audit_log_and_a_guardian_program_follow_the_file() {
    let (dir, config) = load_in_temp_dir(
        "[guardian]\nmode = \"remote\"\ncommand = [\"./guardian.py\"]\nsecret_env = \"S\"\n",
    );
    assert_eq!(config.audit.path, dir.path().join("acs-audit.jsonl"));
    assert_eq!(
        config.guardian.command,
        [dir.path().join("./guardian.py").display().to_string()]
    );
}

#[test]
fn absolute_paths_are_kept() {
    let (_dir, config) = load_in_temp_dir(
        "[[upstream]]\ncommand = [\"/usr/bin/srv\"]\ncwd = \"/srv\"\n\n[audit]\npath = \"/var/log/a.jsonl\"\n",
    );
    assert_eq!(config.upstreams[0].command, ["/usr/bin/srv"]);
    assert_eq!(config.upstreams[0].cwd.as_deref(), Some(Path::new("/srv")));
    assert_eq!(config.audit.path, Path::new("/var/log/a.jsonl"));
}

#[test]
fn text_without_a_file_keeps_paths_as_written() {
    let config = Config::from_toml("t.toml", RELATIVE_PATHS).unwrap();
    assert_eq!(config.upstreams[0].command[0], "bin/server");
    assert_eq!(config.audit.path, Path::new("logs/audit.jsonl"));
    let zero = Config::for_command(vec!["./srv".into()]).unwrap();
    assert_eq!(zero.upstreams[0].command, ["./srv"]);
    assert_eq!(zero.audit.path, Path::new("acs-audit.jsonl"));
}

#[test]
fn rego_keys_belong_to_the_rego_engine() {
    let err = Config::from_toml("t.toml", "[policy]\nrego = [\"p/*.rego\"]\n").unwrap_err();
    assert!(
        err.to_string()
            .contains("policy.rego is only used with engine = \"rego\""),
        "{err}"
    );
    let text = "[policy]\nengine = \"rego\"\nrego = [\"p.rego\"]\n\n[[policy.rule]]\nname = \"x\"\ndecision = \"allow\"\n";
    let err = Config::from_toml("t.toml", text).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("t.toml:5: [[policy.rule]] is not used"),
        "{err}"
    );
    let err = Config::from_toml("t.toml", "[policy]\nengine = \"rego\"\n").unwrap_err();
    assert!(err.to_string().contains("needs at least one glob"), "{err}");
}

#[test]
fn rego_files_follow_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    std::fs::write(
        dir.path().join("policies/p.rego"),
        "package acs\ndecision := {\"decision\": \"allow\"}\n",
    )
    .unwrap();
    let file = dir.path().join("proxy.toml");
    std::fs::write(
        &file,
        "[policy]\nengine = \"rego\"\nrego = [\"policies/*.rego\"]\nid = \"mine\"\n",
    )
    .unwrap();
    let config = Config::load(&file).unwrap();
    let rego = config.rego.expect("a Rego policy");
    assert_eq!(rego.files(), [dir.path().join("policies/p.rego")]);
    assert_eq!(rego.policy_id(), "mine");
}

#[test]
fn sample_config_loads() {
    let config = Config::load(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/proxy.toml"
    )))
    .unwrap();
    assert_eq!(config.upstreams.len(), 1);
}

const TWO_UPSTREAMS: &str = "[[upstream]]\nname = \"a\"\ncommand = [\"a\"]\n\n[[upstream]]\nname = \"b\"\ncommand = [\"b\"]\n";

#[test]
fn an_aggregate_is_read_with_its_defaults() {
    let text =
        format!("{TWO_UPSTREAMS}\n[[aggregate]]\nname = \"all\"\nupstreams = [\"a\", \"b\"]\n");
    let config = Config::from_toml("t.toml", &text).unwrap();
    let aggregate = config.aggregate("all").unwrap();
    assert_eq!(aggregate.prefix, PrefixMode::Always);
    assert_eq!(aggregate.separator, "__");
    assert!(aggregate.tools.is_empty());
    assert_eq!(
        (
            aggregate.restart_backoff_ms,
            aggregate.restart_max_backoff_ms
        ),
        (1_000, 60_000)
    );
    // Its upstreams are reached through it: the only network route.
    assert_eq!(config.route_names(), vec!["all".to_owned()]);
    // Over stdio (the default listener) one aggregate of several is fine.
    assert_eq!(config.listen.transport, ListenTransport::Stdio);
}

#[test]
fn aggregate_keys_are_checked() {
    let text = format!(
        "{TWO_UPSTREAMS}\n[[aggregate]]\nname = \"all\"\nupstreams = [\"a\"]\nprefix = \"on_conflict\"\nseparator = \".\"\ntools = [\"a.*\", \"!*.secret\"]\n"
    );
    let config = Config::from_toml("t.toml", &text).unwrap();
    assert_eq!(config.aggregates[0].prefix, PrefixMode::OnConflict);
    // `b` is merged by no aggregate: it keeps its own route.
    assert_eq!(config.route_names(), vec!["all".to_owned(), "b".to_owned()]);
    let refused = |aggregate: &str, wanted: &str| {
        let text = format!(
            "[listen]\ntransport = \"http\"\n\n{TWO_UPSTREAMS}\n[[aggregate]]\n{aggregate}\n"
        );
        let err = Config::from_toml("t.toml", &text).unwrap_err().to_string();
        assert!(err.contains(wanted), "{aggregate}: {err}");
    };
    refused(
        "name = \"all\"\nupstreams = [\"a\", \"c\"]",
        "\"c\", which is no [[upstream]]",
    );
    refused("name = \"all\"\nupstreams = []", "at least one");
    refused(
        "name = \"a\"\nupstreams = [\"b\"]",
        "the name of an [[upstream]]",
    );
    refused("name = \"all\"\nupstreams = [\"a\", \"a\"]", "listed twice");
    refused(
        "name = \"all\"\nupstreams = [\"a\"]\nprefix = \"sometimes\"",
        "sometimes",
    );
    refused(
        "name = \"all\"\nupstreams = [\"a\"]\nseparator = \"\"",
        "separator",
    );
    refused(
        "name = \"all\"\nupstreams = [\"a\"]\ntools = [\"[\"]",
        "tools pattern",
    );
    refused(
        "name = \"all\"\nupstreams = [\"a\"]\nrestart_backoff_ms = 0",
        "restart_backoff_ms",
    );
    refused(
        "name = \"all\"\nupstreams = [\"a\"]\nrestart_backoff_ms = 5000\nrestart_max_backoff_ms = 1000",
        "restart_max_backoff_ms",
    );
    refused(
        "name = \"all\"\nupstreams = [\"a\"]\n\n[[aggregate]]\nname = \"all\"\nupstreams = [\"b\"]",
        "two [[aggregate]] routes",
    );
}

#[test]
fn stdio_serves_one_upstream_or_one_aggregate() {
    let err = Config::from_toml("t.toml", TWO_UPSTREAMS).unwrap_err();
    assert!(err.to_string().contains("one [[aggregate]]"), "{err}");
    let text = format!(
        "{TWO_UPSTREAMS}\n[[aggregate]]\nname = \"x\"\nupstreams = [\"a\"]\n\n[[aggregate]]\nname = \"y\"\nupstreams = [\"b\"]\n"
    );
    let err = Config::from_toml("t.toml", &text).unwrap_err();
    assert!(
        err.to_string().contains("at most one [[aggregate]]"),
        "{err}"
    );
}
