//! Who is calling over stdio: the agent that spawned the proxy runs as
//! some OS user, and that is the caller unless the configuration names
//! one (`[hooks] user_id`, `roles`, `tenant`).

use nix::unistd::{Uid, User};

use crate::config::HooksConfig;
use crate::hooks::{Identity, IdentityDescriptor};

/// The identity every hook of a stdio session carries.
pub fn caller(hooks: &HooksConfig) -> Identity {
    let (user_id, descriptor) = match &hooks.user_id {
        Some(user_id) => (user_id.clone(), IdentityDescriptor::Configured),
        None => os_user(),
    };
    Identity {
        user_id,
        roles: hooks.roles.clone(),
        tenant: hooks.tenant.clone(),
        descriptor,
    }
}

/// The real user id of the process and its login name, when the user
/// database has one (a container may run as a bare uid).
fn os_user() -> (String, IdentityDescriptor) {
    let uid = Uid::current();
    let user = User::from_uid(uid).ok().flatten().map(|user| user.name);
    let user_id = user.clone().unwrap_or_else(|| uid.to_string());
    let descriptor = IdentityDescriptor::PosixUid {
        uid: uid.as_raw(),
        user,
    };
    (user_id, descriptor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_os_user_unless_configured() {
        let hooks = HooksConfig::default();
        let identity = caller(&hooks);
        let IdentityDescriptor::PosixUid { uid, .. } = identity.descriptor else {
            panic!("{identity:?}");
        };
        assert_eq!(uid, Uid::current().as_raw());
        let hooks = HooksConfig {
            user_id: Some("ci-bot".into()),
            roles: vec!["deployer".into()],
            tenant: Some("acme".into()),
            ..HooksConfig::default()
        };
        let identity = caller(&hooks);
        assert_eq!(identity.user_id, "ci-bot");
        assert_eq!(identity.roles, ["deployer"]);
        assert_eq!(identity.tenant.as_deref(), Some("acme"));
        assert_eq!(identity.descriptor, IdentityDescriptor::Configured);
    }
}
