//! `wakeful list` (this host's or every host's monitors) and `wakeful stop`.

use wakeful_client::{connect, Paths};
use wakeful_core::MonitorInfo;
use wakeful_protocol::{WakeDelivery, WakeStatus};

use crate::render::{self, print_list, show};
use crate::{ask, Failure};

pub(super) async fn list(
    paths: &Paths,
    session: Option<String>,
    json: bool,
) -> Result<u8, Failure> {
    let mut conn = connect(paths).await?;
    let list: Vec<MonitorInfo> = conn
        .call(wakeful_protocol::ListMonitors {
            session: session.clone(),
        })
        .await?;
    if !print_list(
        &list,
        json,
        "no monitors (active, or ended within the last hour)",
        render::monitor_table,
    )? {
        return Ok(0);
    }
    if let Some(session) = session {
        let w: Option<WakeStatus> = conn
            .call(wakeful_protocol::ShowWake {
                session: session.clone(),
            })
            .await?;
        if let Some(WakeDelivery::Undelivered {
            events_from,
            events_to,
            reason,
            ..
        }) = w.map(|w| w.delivery)
        {
            outln!(
                "wake undelivered: events #{events_from}–#{events_to} of session {session} did not reach the agent ({}); they go with the next wake",
                wakeful_core::present::one_line(&reason)
            )?;
        }
    }
    Ok(0)
}

pub(super) async fn list_all_hosts(
    paths: &Paths,
    session: Option<String>,
    json: bool,
) -> Result<u8, Failure> {
    let list = ask(paths, wakeful_protocol::ListClusterMonitors { session }).await?;
    print_list(
        &list,
        json,
        "no monitors on any host (active, or ended within the last hour)",
        render::host_monitor_table,
    )?;
    Ok(0)
}

pub(super) async fn stop(paths: &Paths, id: String, json: bool) -> Result<u8, Failure> {
    let info = ask(paths, wakeful_protocol::StopMonitor { id }).await?;
    show(&info, json, |i| outln!("stopped {}", i.id))
}
