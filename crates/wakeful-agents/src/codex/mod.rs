//! Codex: the wake adapter that starts a turn in a Codex thread through its
//! app-server ([`wake`], the daemon's side), and what can be told of Codex
//! from outside ([`probe`]), what `wakeful doctor` reports of a Codex
//! route ([`doctor`]), and when a session is routed to its Codex thread
//! without being asked ([`auto_route`]).

pub mod auto_route;
pub mod doctor;
pub mod probe;
#[cfg(feature = "daemon")]
pub mod wake;
