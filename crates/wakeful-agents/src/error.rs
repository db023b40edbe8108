//! The error of a hook or an installer, and which exit code it means.

/// Why a hook or an installer failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Invalid input or usage (exit 2).
    #[error("{0}")]
    Usage(String),
    /// Something failed (exit 1).
    #[error("{0}")]
    Failed(String),
    /// Reading or writing failed (a closed stdout among them).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Talking to the daemon failed.
    #[error(transparent)]
    Client(#[from] wakeful_client::ClientError),
}

impl Error {
    /// Invalid input or usage.
    pub fn usage(message: impl Into<String>) -> Self {
        Error::Usage(message.into())
    }

    /// Something failed.
    pub fn failed(message: impl Into<String>) -> Self {
        Error::Failed(message.into())
    }
}
