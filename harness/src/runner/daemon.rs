//! The probe's daemon: started through [`crate::dut::launch`] on the
//! run's sandbox at the probe's first connection (or `start`), stopped
//! with an authenticated `server.shutdown` at its end.

use super::Runner;
use crate::dut::{self, Env, Launch};
use std::process::Child;
use std::time::Duration;

/// A started daemon.
pub(super) struct Daemon {
    pub(super) launcher: Child,
}

impl Runner<'_> {
    pub(super) fn start(&mut self, line: usize, extra: &[String]) {
        if self.daemon_started {
            return;
        }
        self.daemon_started = true;
        if let Some(banner) = self.live_banner.take() {
            // Live mode: the daemon is already running; record its banner
            // where a fresh run would have started it.
            let v = self.norm.output(&banner);
            self.t.push(format!("L{line} banner"), v);
            return;
        }
        let token_file = self.run.join("token");
        let mut extra = extra.to_vec();
        if let Some(build) = &self.probe.build {
            extra.extend(["-reference-build".to_string(), format!("{build:0<40}")]);
        }
        let extra = extra.as_slice();
        let launch = Launch {
            bin: &self.cfg.bin,
            socket: &self.socket,
            token_file: &token_file,
            log: &self.log,
            append_log: false,
            cwd: &self.root,
            env: Env::Exactly(self.env()),
            extra,
            fd_limit: None,
            banner_within: Duration::from_secs(20),
            transport: self.cfg.transport,
        };
        match dut::launch(&launch, &self.probe.token_file) {
            Ok(started) => {
                let v = self.norm.output(&started.banner);
                self.t.push(format!("L{line} banner"), v);
                self.daemon = Some(Daemon {
                    launcher: started.launcher,
                });
            }
            Err(e) => self.t.push(format!("L{line} start"), e.to_string()),
        }
    }

    pub(super) fn stop_daemon(&mut self) {
        let Some(mut d) = self.daemon.take() else { return };
        let env = self.env();
        let via = dut::Via {
            transport: self.cfg.transport,
            bin: &self.cfg.bin,
            env: &env,
        };
        dut::stop(&self.socket, &self.ctx.token, &mut d.launcher, &via);
    }
}
