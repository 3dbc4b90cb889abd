//! The config loader: any text is either a config or an error naming its
//! origin; an accepted config's policy is the one the policy parser alone
//! makes of the same text.
#![no_main]

use acs_proxy::config::Config;
use acs_proxy::policy::Policy;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::from_toml("fuzz.toml", text) {
        Ok(config) => {
            let policy = Policy::from_toml_str("fuzz.toml", text)
                .expect("a config's policy compiles on its own");
            assert_eq!(policy.rule_count(), config.policy.rule_count());
            assert!(config.limits.max_message_bytes >= 1024);
            assert!(config.limits.max_in_flight >= 1);
        }
        Err(err) => assert!(err.to_string().contains("fuzz.toml"), "{err}"),
    }
});
