//! The git directory under `veilfs run`, without a mount: read-only but for what
//! everyday git writes (see `veilfs::fs::git_guard`). One named test per row: an
//! operation the command tries in the workspace's repository, and whether the
//! filesystem does it or refuses it (`EACCES`, naming the path).

use std::ffi::OsStr;
use std::io;
use std::path::PathBuf;
use std::process::Command;

use veilfs::Policy;
use veilfs::fs::VeilFs;
use veilfs::fs::inode::ROOT;
use veilfs::fs::ops::{Refusal, SetAttr};

/// The request each call stands for: this process, as root.
fn cx() -> veilfs::fs::request::Req {
    veilfs::fs::request::Req::new("test", std::process::id(), 0, 0)
}

/// A workspace holding a repository with one commit, a submodule's repository in
/// `.git/modules/lib/sub` (named over two directories), a linked worktree's in
/// `.git/worktrees/wt`, a file named `alternates` in `.git/refs/carry`, a nested
/// repository in `vendor/lib`, and `staged/` (a directory holding a rebase's todo
/// list and an `alternates` file), `clean/`, `file` and `link` to move in; served
/// as `veilfs run` serves it.
struct Repo {
    _tmp: tempfile::TempDir,
    src: PathBuf,
    fs: VeilFs,
}

fn sh(dir: &std::path::Path, script: &str) {
    let o = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

impl Repo {
    fn new() -> Repo {
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-gitops")
            .tempdir()
            .unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        sh(
            &src,
            "git init -q -b main && echo a > a.txt && git add a.txt && \
             git -c user.name=t -c user.email=t@t commit -qm one && \
             mkdir -p .git/modules/lib/sub/objects .git/modules/lib/sub/refs/heads \
               .git/modules/lib/sub/hooks .git/worktrees/wt/logs && \
             echo 'ref: refs/heads/main' > .git/modules/lib/sub/HEAD && \
             echo '[core]' > .git/modules/lib/sub/config && \
             echo 'ref: refs/heads/wt' > .git/worktrees/wt/HEAD && \
             echo /elsewhere/.git > .git/worktrees/wt/gitdir && \
             echo ../.. > .git/worktrees/wt/commondir && \
             mkdir -p staged/x && echo 'exec touch /tmp/pwned' > staged/git-rebase-todo && \
             echo /tmp/objects > staged/alternates && echo plain > staged/x/plain && \
             mkdir -p clean/y && echo c > clean/y/c && echo f > file && \
             ln -s /tmp link && mkdir .git/refs/carry && echo /tmp > .git/refs/carry/alternates && \
             mkdir -p vendor/lib && git -C vendor/lib init -q",
        );
        let policy = Policy::parse("policy.toml", "default = \"allow\"\n").unwrap();
        let git = veilfs::fs::config::FsConfig {
            git: veilfs::fs::config::Git::Root,
            ..Default::default()
        };
        let fs = VeilFs::new(&src, policy, None, git).unwrap();
        Repo { _tmp: tmp, src, fs }
    }

    /// The node of the workspace-relative `rel` (the root for "").
    fn walk(&self, rel: &str) -> io::Result<u64> {
        let mut ino = ROOT;
        for name in rel.split('/').filter(|n| !n.is_empty()) {
            ino = self.fs.lookup(&cx(), ino, OsStr::new(name))?.0.ino;
        }
        Ok(ino)
    }

    /// The node of the directory holding `rel`, and `rel`'s last name.
    fn parent<'a>(&self, rel: &'a str) -> io::Result<(u64, &'a OsStr)> {
        let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        Ok((self.walk(dir)?, OsStr::new(name)))
    }
}

/// What the command tries, on workspace-relative paths.
enum Op {
    Create(&'static str),
    Mkdir(&'static str),
    Symlink(&'static str),
    Fifo(&'static str),
    Write(&'static str),
    Truncate(&'static str),
    Chmod(&'static str),
    Unlink(&'static str),
    Rename(&'static str, &'static str),
    Exchange(&'static str, &'static str),
    Link(&'static str, &'static str),
}

fn attempt(r: &Repo, op: &Op) -> io::Result<()> {
    use Op::*;
    match *op {
        Create(p) => {
            let (dir, name) = r.parent(p)?;
            r.fs.create(&cx(), dir, name, 0o644, 0, libc::O_WRONLY)
                .map(|_| ())
        }
        Mkdir(p) => {
            let (dir, name) = r.parent(p)?;
            r.fs.mkdir(&cx(), dir, name, 0o755, 0).map(|_| ())
        }
        Symlink(p) => {
            let (dir, name) = r.parent(p)?;
            r.fs.symlink(&cx(), dir, name, OsStr::new("/tmp"))
                .map(|_| ())
        }
        Fifo(p) => {
            let (dir, name) = r.parent(p)?;
            r.fs.mknod(&cx(), dir, name, libc::S_IFIFO | 0o644, 0, 0)
                .map(|_| ())
        }
        Write(p) => {
            r.fs.open(&cx(), r.walk(p)?, libc::O_WRONLY)
                .map(|fh| r.fs.release(fh))
        }
        Truncate(p) => {
            let size = SetAttr {
                size: Some(0),
                ..SetAttr::default()
            };
            r.fs.setattr(&cx(), r.walk(p)?, &size, None).map(|_| ())
        }
        Chmod(p) => {
            let mode = SetAttr {
                mode: Some(0o777),
                ..SetAttr::default()
            };
            r.fs.setattr(&cx(), r.walk(p)?, &mode, None).map(|_| ())
        }
        Unlink(p) => {
            let (dir, name) = r.parent(p)?;
            r.fs.unlink(&cx(), dir, name)
        }
        Rename(from, to) | Exchange(from, to) => {
            let flags = if matches!(op, Exchange(..)) {
                libc::RENAME_EXCHANGE
            } else {
                0
            };
            let ((fd, fname), (td, tname)) = (r.parent(from)?, r.parent(to)?);
            r.fs.rename(&cx(), fd, fname, td, tname, flags).map(|_| ())
        }
        Link(from, to) => {
            let (td, tname) = r.parent(to)?;
            r.fs.link(&cx(), r.walk(from)?, td, tname).map(|_| ())
        }
    }
}

/// `Some(path)`: refused, naming `path`; `None`: done.
#[track_caller]
fn check(op: Op, refused_at: Option<&str>) {
    let r = Repo::new();
    let got = attempt(&r, &op);
    match (refused_at, got) {
        (None, Ok(())) => {}
        (None, Err(e)) => panic!("expected it done, got {e}"),
        (Some(path), Ok(())) => panic!("expected {path} refused, it was done"),
        (Some(path), Err(e)) => {
            let refusal = e
                .get_ref()
                .and_then(|x| x.downcast_ref::<Refusal>())
                .unwrap_or_else(|| panic!("expected a policy refusal, got {e}"));
            assert_eq!(String::from_utf8_lossy(&refusal.path), path);
        }
    }
    // Nothing the rule refuses is ever on disk.
    for planted in [
        ".git/rebase-merge",
        ".git/objects/info/alternates",
        ".git/info/attributes",
    ] {
        assert!(!r.src.join(planted).exists(), "{planted} on disk");
    }
}

/// Done.
fn done() -> Option<&'static str> {
    None
}

/// Refused, naming `path`.
fn refused(path: &'static str) -> Option<&'static str> {
    Some(path)
}

/// `name: operation => done()` or `name: operation => refused("path")`.
macro_rules! git_ops {
    ($($name:ident: $op:expr => $expect:expr,)*) => {
        $(
            #[test]
            fn $name() {
                use Op::*;
                check($op, $expect);
            }
        )*
    };
}

git_ops! {
    // The door: a rebase's todo list, however it comes to be.
    rebase_merge_made: Mkdir(".git/rebase-merge") => refused(".git/rebase-merge"),
    rebase_merge_moved_in: Rename("staged", ".git/rebase-merge") => refused(".git/rebase-merge"),
    rebase_todo_moved_into_refs_then_out: Rename("staged", ".git/refs/staged") => done(),
    a_directory_holding_alternates_moved_to_objects_info:
        Rename("staged", ".git/objects/info") => refused(".git/objects/info/alternates"),
    info_exchanged_with_a_directory_holding_attributes: Exchange("staged", ".git/info") => refused(".git/info"),
    a_directory_exchanged_with_refs_lands_where_anything_is_written: Exchange("staged", ".git/refs") => done(),
    sequencer_made: Mkdir(".git/sequencer") => refused(".git/sequencer"),
    rebase_apply_made: Mkdir(".git/rebase-apply") => refused(".git/rebase-apply"),
    // Everything git reads as instructions, by the rule.
    config_written: Write(".git/config") => refused(".git/config"),
    config_truncated: Truncate(".git/config") => refused(".git/config"),
    config_chmod: Chmod(".git/config") => refused(".git/config"),
    config_removed: Unlink(".git/config") => refused(".git/config"),
    config_replaced: Rename("file", ".git/config") => refused(".git/config"),
    hooks_written: Create(".git/hooks/post-checkout") => refused(".git/hooks/post-checkout"),
    exclude_written: Write(".git/info/exclude") => refused(".git/info/exclude"),
    attributes_made: Create(".git/info/attributes") => refused(".git/info/attributes"),
    attributes_linked: Link("file", ".git/info/attributes") => refused(".git/info/attributes"),
    alternates_made: Create(".git/objects/info/alternates") => refused(".git/objects/info/alternates"),
    alternates_moved_in: Rename("file", ".git/objects/info/alternates") => refused(".git/objects/info/alternates"),
    description_written: Write(".git/description") => refused(".git/description"),
    shallow_made: Create(".git/shallow") => refused(".git/shallow"),
    a_new_name: Create(".git/evil") => refused(".git/evil"),
    remotes_made: Mkdir(".git/remotes") => refused(".git/remotes"),
    a_file_carried_from_where_git_writes_to_where_it_obeys:
        Rename(".git/refs/carry", ".git/objects/info") => refused(".git/objects/info/alternates"),
    // Only regular files and directories, even where git writes.
    a_link_in_objects: Symlink(".git/objects/info2") => refused(".git/objects/info2"),
    a_link_moved_into_refs: Rename("link", ".git/refs/l") => refused(".git/refs/l"),
    a_link_exchanged_with_a_ref_directory: Exchange("link", ".git/refs/tags") => refused(".git/refs/tags"),
    a_fifo_at_a_message: Fifo(".git/MERGE_MSG") => refused(".git/MERGE_MSG"),
    // What everyday git writes.
    an_object: Create(".git/objects/ab") => done(),
    an_object_directory: Mkdir(".git/objects/ab") => done(),
    a_ref: Create(".git/refs/heads/topic") => done(),
    a_ref_lock_renamed_over_head: Rename("file", ".git/HEAD") => done(),
    the_index_lock: Create(".git/index.lock") => done(),
    the_index_written: Write(".git/index") => done(),
    a_reflog: Create(".git/logs/refs/heads/topic") => done(),
    merge_state: Create(".git/MERGE_HEAD") => done(),
    a_message: Create(".git/MERGE_MSG") => done(),
    packed_refs: Create(".git/packed-refs") => done(),
    a_stash_index: Create(".git/index.stash.42") => done(),
    fetch_head: Create(".git/FETCH_HEAD") => done(),
    a_directory_of_plain_files_moved_into_refs: Rename("clean", ".git/refs/clean") => done(),
    gc_pid: Create(".git/gc.pid") => done(),
    info_refs: Create(".git/info/refs") => done(),
    // A submodule's repository (named over two directories) and a linked worktree's.
    a_submodule_config: Write(".git/modules/lib/sub/config") => refused(".git/modules/lib/sub/config"),
    a_submodule_hook: Create(".git/modules/lib/sub/hooks/x") => refused(".git/modules/lib/sub/hooks/x"),
    a_submodule_rebase: Mkdir(".git/modules/lib/sub/rebase-merge") => refused(".git/modules/lib/sub/rebase-merge"),
    a_submodule_object: Mkdir(".git/modules/lib/sub/objects/ab") => done(),
    a_submodule_head: Rename("file", ".git/modules/lib/sub/HEAD") => done(),
    a_new_submodule_repository: Mkdir(".git/modules/new") => refused(".git/modules/new"),
    beside_a_submodule_on_the_way: Mkdir(".git/modules/lib/refs") => refused(".git/modules/lib/refs"),
    a_head_on_the_way_to_a_submodule: Create(".git/modules/lib/HEAD") => refused(".git/modules/lib/HEAD"),
    a_submodule_repository_replaced: Exchange("clean", ".git/modules/lib/sub") => refused(".git/modules/lib/sub"),
    a_worktree_head: Rename("file", ".git/worktrees/wt/HEAD") => done(),
    a_worktree_reflog: Create(".git/worktrees/wt/logs/HEAD") => done(),
    a_worktree_gitdir: Write(".git/worktrees/wt/gitdir") => refused(".git/worktrees/wt/gitdir"),
    a_worktree_rebase: Mkdir(".git/worktrees/wt/rebase-merge") => refused(".git/worktrees/wt/rebase-merge"),
    a_new_worktree: Mkdir(".git/worktrees/new") => refused(".git/worktrees/new"),
    // A repository below the workspace's, by the same rule; moved whole with a
    // directory above it, it stays what it was.
    a_nested_repository_config: Write("vendor/lib/.git/config") => refused("vendor/lib/.git/config"),
    a_nested_repository_rebase: Mkdir("vendor/lib/.git/rebase-merge") => refused("vendor/lib/.git/rebase-merge"),
    a_nested_repository_moved_with_its_directory: Rename("vendor", "vendor-old") => done(),
    // Outside the git directory nothing changes.
    a_directory_named_like_git_state: Mkdir("rebase-merge") => done(),
    a_workspace_link: Symlink("l2") => done(),
}
