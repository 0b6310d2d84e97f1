//! The protocol's methods as one typed table: [`Method`], parsed once from
//! the request's `method` string and matched exhaustively from then on.
//!
//! Everything that lists or names methods derives from here: the
//! `server.capabilities` list ([`METHODS`]), the -32601 texts
//! ([`Method::from_name`]), dispatch (one arm per namespace in
//! [`crate::serve::dispatch`], one arm per method in each handler module), the
//! instant set and the per-method counters. Adding a method is one line in
//! its namespace's table below plus one handler arm; the compiler then
//! points at every match that must learn it.

/// Declares the methods of one namespace: an enum whose variants are in
/// `server.capabilities` order, with their wire names.
macro_rules! namespace_methods {
    ($(#[$meta:meta])* $enum:ident { $($variant:ident => $wire:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $enum {
            $($variant,)+
        }

        impl $enum {
            /// Every method of the namespace, in `server.capabilities` order.
            pub const ALL: &'static [$enum] = &[$($enum::$variant,)+];

            /// The wire name, e.g. `files.stat`.
            pub const fn name(self) -> &'static str {
                match self {
                    $($enum::$variant => $wire,)+
                }
            }
        }

        impl std::fmt::Display for $enum {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

namespace_methods! {
    /// `server.*`: no params. `server.version` is not one of them: the
    /// reference removed it at `7d193f89`, and every build a client pins
    /// answers it `-32601 Unknown method` (docs/PROTOCOL.md).
    ServerMethod {
        Ping => "server.ping",
        Capabilities => "server.capabilities",
        Shutdown => "server.shutdown",
    }
}

namespace_methods! {
    /// `files.*`: params bound as [`crate::protocol::params::PathParams`].
    FilesMethod {
        List => "files.list",
        Validate => "files.validate",
        Stat => "files.stat",
        Read => "files.read",
        ExtractTar => "files.extract_tar",
    }
}

namespace_methods! {
    /// `git.*`: params bound as [`crate::protocol::params::GitParams`].
    GitMethod {
        Info => "git.info",
        Status => "git.status",
        ListBranches => "git.list_branches",
        WorktreeCreate => "git.worktree_create",
        WorktreeRemove => "git.worktree_remove",
    }
}

namespace_methods! {
    /// `launcher.*` (build 89cb6289's managed launcher): params bound by
    /// the handler ([`crate::methods::launcher`]).
    LauncherMethod {
        Resolve => "launcher.resolve",
    }
}

namespace_methods! {
    /// `process.*`: params bound as [`crate::protocol::params::ProcessParams`].
    ProcessMethod {
        Spawn => "process.spawn",
        Stdin => "process.stdin",
        Kill => "process.kill",
        KillAndWait => "process.killAndWait",
        Reattach => "process.reattach",
    }
}

namespace_methods! {
    /// `plugins.*`: params bound by the handler,
    /// whose `-32602` carries the decoder's detail.
    PluginsMethod {
        Prune => "plugins.prune",
    }
}

/// A method of the protocol, by namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Server(ServerMethod),
    Files(FilesMethod),
    Git(GitMethod),
    Launcher(LauncherMethod),
    Process(ProcessMethod),
    Plugins(PluginsMethod),
}

/// How many methods there are.
pub const COUNT: usize = ServerMethod::ALL.len()
    + FilesMethod::ALL.len()
    + GitMethod::ALL.len()
    + LauncherMethod::ALL.len()
    + ProcessMethod::ALL.len()
    + PluginsMethod::ALL.len();

/// Every method in `server.capabilities` order: namespaces in the order of
/// [`Method`]'s variants, each in its table's order.
pub const ALL: [Method; COUNT] = {
    let mut all = [Method::Server(ServerMethod::Ping); COUNT];
    let mut i = 0;
    let mut j = 0;
    while j < ServerMethod::ALL.len() {
        all[i] = Method::Server(ServerMethod::ALL[j]);
        i += 1;
        j += 1;
    }
    j = 0;
    while j < FilesMethod::ALL.len() {
        all[i] = Method::Files(FilesMethod::ALL[j]);
        i += 1;
        j += 1;
    }
    j = 0;
    while j < GitMethod::ALL.len() {
        all[i] = Method::Git(GitMethod::ALL[j]);
        i += 1;
        j += 1;
    }
    j = 0;
    while j < LauncherMethod::ALL.len() {
        all[i] = Method::Launcher(LauncherMethod::ALL[j]);
        i += 1;
        j += 1;
    }
    j = 0;
    while j < ProcessMethod::ALL.len() {
        all[i] = Method::Process(ProcessMethod::ALL[j]);
        i += 1;
        j += 1;
    }
    j = 0;
    while j < PluginsMethod::ALL.len() {
        all[i] = Method::Plugins(PluginsMethod::ALL[j]);
        i += 1;
        j += 1;
    }
    all
};

/// The wire names of [`ALL`], as `server.capabilities` lists them.
pub const METHODS: [&str; COUNT] = {
    let mut names = [""; COUNT];
    let mut i = 0;
    while i < COUNT {
        names[i] = ALL[i].name();
        i += 1;
    }
    names
};

impl Method {
    /// The wire name, e.g. `process.spawn`.
    pub const fn name(self) -> &'static str {
        match self {
            Method::Server(m) => m.name(),
            Method::Files(m) => m.name(),
            Method::Git(m) => m.name(),
            Method::Launcher(m) => m.name(),
            Method::Process(m) => m.name(),
            Method::Plugins(m) => m.name(),
        }
    }

    /// Position in [`ALL`] (and [`METHODS`]).
    pub const fn index(self) -> usize {
        const FILES: usize = ServerMethod::ALL.len();
        const GIT: usize = FILES + FilesMethod::ALL.len();
        const LAUNCHER: usize = GIT + GitMethod::ALL.len();
        const PROCESS: usize = LAUNCHER + LauncherMethod::ALL.len();
        const PLUGINS: usize = PROCESS + ProcessMethod::ALL.len();
        match self {
            Method::Server(m) => m as usize,
            Method::Files(m) => FILES + m as usize,
            Method::Git(m) => GIT + m as usize,
            Method::Launcher(m) => LAUNCHER + m as usize,
            Method::Process(m) => PROCESS + m as usize,
            Method::Plugins(m) => PLUGINS + m as usize,
        }
    }

    /// Resolves a request's `method` string against the whole table, or
    /// gives the -32601 message ([`resolve`]).
    pub fn from_name(name: &str) -> Result<Method, String> {
        resolve(name, |_| true)
    }
}

/// Resolves a request's `method` string among the methods `serves` keeps,
/// or gives the -32601 message: no dot is a format error, a prefix none of
/// those methods has is an unknown namespace, anything else not among them
/// an unknown method.
pub fn resolve(name: &str, serves: impl Fn(Method) -> bool) -> Result<Method, String> {
    let Some((namespace, _)) = name.split_once('.') else {
        return Err(format!("Invalid method format: {name}"));
    };
    if let Some(method) = ALL.iter().find(|m| m.name() == name && serves(**m)) {
        return Ok(*method);
    }
    let known_namespace = ALL
        .iter()
        .filter(|m| serves(**m))
        .any(|m| m.name().split_once('.').is_some_and(|(ns, _)| ns == namespace));
    if known_namespace {
        Err(format!("Unknown method: {name}"))
    } else {
        Err(format!("Unknown namespace: {namespace}"))
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_order_is_the_documented_one() {
        assert_eq!(
            METHODS,
            [
                "server.ping",
                "server.capabilities",
                "server.shutdown",
                "files.list",
                "files.validate",
                "files.stat",
                "files.read",
                "files.extract_tar",
                "git.info",
                "git.status",
                "git.list_branches",
                "git.worktree_create",
                "git.worktree_remove",
                "launcher.resolve",
                "process.spawn",
                "process.stdin",
                "process.kill",
                "process.killAndWait",
                "process.reattach",
                "plugins.prune",
            ]
        );
    }

    #[test]
    fn names_round_trip_and_index_matches_the_table() {
        for (i, method) in ALL.iter().enumerate() {
            assert_eq!(method.index(), i, "{method}");
            assert_eq!(Method::from_name(method.name()), Ok(*method));
            // The namespace prefix is the enum variant's.
            let prefix = match method {
                Method::Server(_) => "server.",
                Method::Files(_) => "files.",
                Method::Git(_) => "git.",
                Method::Launcher(_) => "launcher.",
                Method::Process(_) => "process.",
                Method::Plugins(_) => "plugins.",
            };
            assert!(method.name().starts_with(prefix), "{method}");
        }
    }

    #[test]
    fn unknown_method_texts() {
        assert_eq!(Method::from_name(""), Err("Invalid method format: ".to_string()));
        assert_eq!(
            Method::from_name("nope"),
            Err("Invalid method format: nope".to_string())
        );
        assert_eq!(Method::from_name(".x"), Err("Unknown namespace: ".to_string()));
        assert_eq!(Method::from_name("foo.bar"), Err("Unknown namespace: foo".to_string()));
        assert_eq!(
            Method::from_name("Server.ping"),
            Err("Unknown namespace: Server".to_string())
        );
        assert_eq!(
            Method::from_name("files.stat.x"),
            Err("Unknown method: files.stat.x".to_string())
        );
        assert_eq!(
            Method::from_name("files.nope"),
            Err("Unknown method: files.nope".to_string())
        );
        // The plugins namespace exists.
        assert_eq!(
            Method::from_name("plugins.bogus"),
            Err("Unknown method: plugins.bogus".to_string())
        );
    }
}
