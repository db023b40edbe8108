//! Wake routes and what an agent should know: `wake_set`, `wake_show`,
//! `wake_clear`, `wake_check`, `digest`.

use wakeful_protocol::{
    CheckWake, ClearWake, ErrorKind, GetDigest, RouteSource, SetWake, ShowWake, WakeClearResult,
};

use super::conn::Handled;
use crate::state::State;

/// `wake_set`: routes the session's events to its agent.
pub(crate) async fn set(state: &State, r: SetWake) -> Handled<SetWake> {
    state
        .storage
        .writable("set a wake route")
        .map_err(|m| (ErrorKind::DiskFull, m.to_string()))?;
    state
        .wakes
        .set(&r.session, r.route, RouteSource::Set)
        .await
        .map_err(|e| (ErrorKind::Invalid, e.to_string()))
}

/// `wake_show`: the session's route and delivery state, if it has one.
pub(crate) fn show(state: &State, r: ShowWake) -> Handled<ShowWake> {
    Ok(state.wakes.show(&r.session))
}

/// `wake_clear`: removes the session's route.
pub(crate) async fn clear(state: &State, r: ClearWake) -> Handled<ClearWake> {
    state
        .storage
        .writable("clear a wake route")
        .map_err(|m| (ErrorKind::DiskFull, m.to_string()))?;
    let cleared = state.wakes.clear(&r.session).await;
    Ok(WakeClearResult {
        session: r.session,
        cleared,
    })
}

/// `wake_check`: whether the session's events would wake its agent now.
pub(crate) fn check(state: &State, r: CheckWake) -> Handled<CheckWake> {
    Ok(state.wake_report(&r.session))
}

/// `digest`: the resume digest of the session.
pub(crate) fn digest(state: &State, r: GetDigest) -> Handled<GetDigest> {
    crate::digest::build(&state.registry, &state.reader, &r.session)
        .map_err(|e| (ErrorKind::Internal, e.to_string()))
}
