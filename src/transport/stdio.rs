//! The proxy's own stdin/stdout as the downstream side (the agent spawned us).
//!
//! stdout belongs to the agent: only MCP frames are written there, and all
//! logging goes to stderr.

use tokio_util::codec::FramedRead;

use super::line::LineCodec;
use super::writer::FrameWriter;

/// The agent side of a stdio deployment.
pub struct StdioDownstream {
    /// Frames from the agent.
    pub reader: FramedRead<tokio::io::Stdin, LineCodec>,
    /// Frames to the agent.
    pub writer: FrameWriter,
    /// The writer task; finishes once every queued frame is written.
    pub writer_task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl StdioDownstream {
    /// Wraps the process's stdin and stdout.
    pub fn open(max_message_bytes: usize, queue: usize) -> Self {
        let reader = FramedRead::new(tokio::io::stdin(), LineCodec::new(max_message_bytes));
        let (writer, writer_task) = FrameWriter::spawn(tokio::io::stdout(), queue);
        Self {
            reader,
            writer,
            writer_task,
        }
    }
}
