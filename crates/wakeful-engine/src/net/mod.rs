//! The network edge: which addresses wakeful may reach ([`policy`]) and the
//! small HTTP/1.1 client that reaches them under that policy ([`http`]),
//! for the wake adapters (OpenCode, webhooks) and the OTLP export.

pub mod http;
pub mod policy;

pub use policy::{NetPolicy, PolicyError};
