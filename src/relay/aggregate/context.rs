//! What a virtual server's session runs with.

use std::sync::Arc;

use crate::audit::AuditLog;
use crate::config::{AggregateConfig, Config};
use crate::guardian::Guardian;
use crate::limits::RequestBudget;
use crate::relay::connector::Connector;

/// Everything a virtual server's session needs besides its agent side.
pub struct AggregateContext {
    /// The configuration in force.
    pub config: Arc<Config>,
    /// The `[[aggregate]]` this session serves.
    pub aggregate: AggregateConfig,
    /// Who decides, for every upstream's relay session.
    pub guardian: Arc<dyn Guardian>,
    /// Where each upstream's session chain is written.
    pub audit: AuditLog,
    /// The in-flight request limits shared by every session of the process.
    pub requests: Arc<RequestBudget>,
    /// Connects each upstream.
    pub connector: Connector,
}
