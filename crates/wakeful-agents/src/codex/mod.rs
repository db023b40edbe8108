//! Codex: the wake adapter that starts a turn in a Codex thread through its
//! app-server ([`wake`], the daemon's side), and what can be told of Codex
//! from outside ([`probe`]) and what `wakeful doctor` reports of a Codex
//! route ([`doctor`]).

pub mod doctor;
pub mod probe;
#[cfg(feature = "daemon")]
pub mod wake;
