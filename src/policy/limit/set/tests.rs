use super::*;
use crate::hooks::IdentityDescriptor;

const WRAPPED_CALL: &str = "protocols/MCP/tools/call";
const STEP_CALL: &str = "steps/toolCallRequest";

#[derive(serde::Deserialize)]
struct Doc {
    #[serde(rename = "limit")]
    limits: Vec<Spanned<LimitSpec>>,
}

fn compile(text: &str) -> Result<RateLimits, PolicyError> {
    let doc: Doc = toml::from_str(text).expect("valid TOML");
    RateLimits::compile(&doc.limits, &PolicySource::new("proxy.toml", text))
}

fn limits(text: &str) -> RateLimits {
    compile(text).unwrap_or_else(|err| panic!("{err}"))
}

fn identity(user: &str, tenant: Option<&str>) -> Identity {
    Identity {
        user_id: user.into(),
        roles: Vec::new(),
        tenant: tenant.map(str::to_owned),
        descriptor: IdentityDescriptor::Configured,
    }
}

fn call<'a>(tool: &'a str, user: Option<&'a Identity>, session: &'a str) -> LimitedCall<'a> {
    LimitedCall {
        hooks: &[WRAPPED_CALL, STEP_CALL],
        tool: Some(tool),
        called_as: None,
        user,
        agent: "agent",
        session,
    }
}

#[test]
fn the_eleventh_call_of_ten_per_minute_is_refused_with_a_wait() {
    let limits = limits(
        "[[limit]]\nname = \"ten\"\ntool = \"echo\"\nper = \"user\"\ncalls = 10\ninterval_s = 60\n",
    );
    let alice = identity("alice", None);
    for _ in 0..10 {
        limits
            .admit(&call("echo", Some(&alice), "s1"))
            .expect("under quota");
    }
    let refused = limits
        .admit(&call("echo", Some(&alice), "s2"))
        .expect_err("the 11th, from another session of the same user");
    assert_eq!(refused.limit(), "ten");
    assert!(
        (5000..=6000).contains(&refused.retry_after_ms()),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("\"ten\""), "{refused}");
    let bob = identity("bob", None);
    limits
        .admit(&call("echo", Some(&bob), "s3"))
        .expect("another user has his own quota");
    limits
        .admit(&call("add", Some(&alice), "s1"))
        .expect("another tool is not limited");
}

#[test]
fn concurrency_is_given_back_when_the_call_ends() {
    let limits = limits("[[limit]]\nname = \"one\"\nper = \"session\"\nconcurrent = 1\n");
    let first = limits.admit(&call("echo", None, "s1")).expect("first");
    let refused = limits
        .admit(&call("echo", None, "s1"))
        .expect_err("second in flight");
    assert!(matches!(refused, RateLimited::Concurrent { max: 1, .. }));
    limits
        .admit(&call("echo", None, "s2"))
        .expect("another session");
    drop(first);
    limits.admit(&call("echo", None, "s1")).expect("given back");
}

#[test]
fn a_rate_refusal_gives_concurrency_back() {
    let limits = limits(
        "[[limit]]\nname = \"c\"\nper = \"global\"\nconcurrent = 1\n\
         [[limit]]\nname = \"r\"\nper = \"global\"\ncalls = 1\ninterval_s = 60\n",
    );
    drop(limits.admit(&call("echo", None, "s")).expect("first"));
    let refused = limits.admit(&call("echo", None, "s")).expect_err("rate");
    assert_eq!(refused.limit(), "r");
    let refused = limits.admit(&call("echo", None, "s")).expect_err("rate");
    assert_eq!(refused.limit(), "r", "the concurrency place was given back");
}

#[test]
fn keys_follow_per() {
    let limits = limits("[[limit]]\nname = \"t\"\nper = \"tenant\"\ncalls = 1\ninterval_s = 60\n");
    let (a1, a2, b) = (
        identity("u1", Some("acme")),
        identity("u2", Some("acme")),
        identity("u3", Some("beta")),
    );
    limits
        .admit(&call("x", Some(&a1), "s1"))
        .expect("acme's first");
    limits
        .admit(&call("x", Some(&a2), "s2"))
        .expect_err("same tenant");
    limits
        .admit(&call("x", Some(&b), "s3"))
        .expect("beta's first");
}

#[test]
fn a_tool_glob_fits_the_name_the_agent_used_too() {
    let limits = limits(
        "[[limit]]\nname = \"demo\"\ntool = \"demo__*\"\nper = \"global\"\ncalls = 1\ninterval_s = 60\n",
    );
    let bare = call("echo", None, "s");
    limits
        .admit(&bare)
        .expect("the server's own name does not fit");
    limits.admit(&bare).expect("still not counted");
    let routed = LimitedCall {
        called_as: Some("demo__echo"),
        ..bare
    };
    limits.admit(&routed).expect("the first call");
    limits.admit(&routed).expect_err("the second call");
}

#[test]
fn hook_globs_select_calls() {
    let limits = limits(
        "[[limit]]\nname = \"reads\"\nhook = \"protocols/MCP/resources/*\"\nper = \"global\"\ncalls = 1\ninterval_s = 60\n",
    );
    let read = LimitedCall {
        hooks: &["protocols/MCP/resources/read"],
        tool: None,
        called_as: None,
        user: None,
        agent: "a",
        session: "s",
    };
    limits.admit(&read).expect("first read");
    limits.admit(&read).expect_err("second read");
    limits
        .admit(&call("echo", None, "s"))
        .expect("tool calls are not reads");
}

#[test]
fn an_unusable_limit_is_located() {
    let cases = [
        (
            "name = \"\"\nper = \"user\"\nconcurrent = 1",
            "name must not be empty",
        ),
        ("name = \"x\"\nper = \"user\"", "a limit needs `calls`"),
        (
            "name = \"x\"\nper = \"user\"\ncalls = 3",
            "`calls` and `interval_s` go together",
        ),
        (
            "name = \"x\"\nper = \"user\"\ncalls = 0\ninterval_s = 1",
            "`calls` must be at least 1",
        ),
        (
            "name = \"x\"\nper = \"user\"\nconcurrent = 0",
            "`concurrent` must be at least 1",
        ),
        (
            "name = \"x\"\nper = \"user\"\nconcurrent = 1\ntool = \"a[\"",
            "invalid glob in tool",
        ),
    ];
    for (body, problem) in cases {
        let text = format!("\n[[limit]]\n{body}\n");
        let message = compile(&text).expect_err(body).to_string();
        assert!(
            message.starts_with("proxy.toml:2: limit ") && message.contains(problem),
            "{message}"
        );
    }
    let twice = "[[limit]]\nname = \"x\"\nper = \"user\"\nconcurrent = 1\n\
                 [[limit]]\nname = \"x\"\nper = \"user\"\nconcurrent = 1\n";
    let message = compile(twice).expect_err("duplicate").to_string();
    assert!(
        message.contains("duplicate limit name (first defined on line 1)"),
        "{message}"
    );
}
