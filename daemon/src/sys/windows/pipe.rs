//! The named-pipe listener of `-listen-pipe` (issue 43).
