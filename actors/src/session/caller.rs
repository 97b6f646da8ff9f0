//! Who sends a request, as the edge established it (never from the body);
//! the session actor checks it against the session's `owner_id`.

use std::sync::Arc;

/// The authenticated caller of one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub principal: Arc<str>,
    /// An admin may see and change every session.
    pub admin: bool,
}

impl Caller {
    /// The local operator of `ACCESS__MODE=trusted_local`: an admin. Its
    /// name is shared, not allocated for each of its requests.
    pub fn operator() -> Caller {
        static LOCAL: std::sync::OnceLock<Arc<str>> = std::sync::OnceLock::new();
        Caller::new(LOCAL.get_or_init(|| Arc::from("local")).clone(), true)
    }

    pub fn new(principal: impl Into<Arc<str>>, admin: bool) -> Caller {
        Caller {
            principal: principal.into(),
            admin,
        }
    }

    /// Whether this caller may touch a stored session owned by `owner`.
    /// A session without an owner (stored before ownership existed) is the
    /// admins' only: nobody can claim it by writing to it.
    pub fn may_touch(&self, owner: Option<&str>) -> bool {
        self.admin || owner == Some(&*self.principal)
    }

    /// The owner filter of a session list: `None` (all) for an admin.
    pub fn list_filter(&self) -> Option<&str> {
        (!self.admin).then_some(&*self.principal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_or_an_admin_may_touch_a_session() {
        let alice = Caller::new("alice", false);
        assert!(alice.may_touch(Some("alice")));
        assert!(!alice.may_touch(Some("bob")));
        assert!(!alice.may_touch(None));
        assert!(Caller::new("root", true).may_touch(Some("bob")));
        assert!(Caller::operator().may_touch(None));
    }

    #[test]
    fn admins_list_everything_and_others_their_own() {
        assert_eq!(Caller::new("alice", false).list_filter(), Some("alice"));
        assert_eq!(Caller::operator().list_filter(), None);
    }
}
