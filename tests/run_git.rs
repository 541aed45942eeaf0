//! Git runs nothing the command wrote: under `veilfs run` the workspace's git
//! directory (and each submodule's and linked worktree's in it) is read-only but for
//! what everyday git writes (objects, refs, logs, the index, `HEAD` and the other
//! `*_HEAD` and message files, `packed-refs`, their locks). Each test attacks from
//! inside a real `veilfs run`, then runs the person's own git outside and checks
//! that nothing planted ran.

mod common;

use common::run::{show, text};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::require_fuse;

/// `TMP/ws`, a repository with two commits (`a.txt`, then `b.txt`), and `TMP/outside/`
/// for files outside the workspace (the marker planted code would make).
struct Repo {
    tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Repo {
    fn new() -> Repo {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-rungit")
            .tempdir()
            .unwrap();
        let dir = tmp.path().join("ws");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(tmp.path().join("outside")).unwrap();
        let r = Repo { tmp, dir };
        r.git(&["init", "-q", "-b", "main"]);
        std::fs::write(r.dir.join("a.txt"), "a\n").unwrap();
        r.git(&["add", "a.txt"]);
        r.git(&["commit", "-qm", "one"]);
        std::fs::write(r.dir.join("b.txt"), "b\n").unwrap();
        r.git(&["add", "b.txt"]);
        r.git(&["commit", "-qm", "two"]);
        r
    }

    fn outside(&self, rel: &str) -> PathBuf {
        self.tmp.path().join("outside").join(rel)
    }

    /// The person's git, outside the session, in `dir`; never opens an editor.
    fn git_in(&self, dir: &Path, args: &[&str]) -> Output {
        Command::new("git")
            .args(["-c", "user.email=t@t", "-c", "user.name=t"])
            .args(args)
            .current_dir(dir)
            .env("GIT_EDITOR", "true")
            .env_remove("GIT_SEQUENCE_EDITOR")
            .output()
            .unwrap()
    }

    /// The person's git in the workspace; must succeed.
    #[track_caller]
    fn git(&self, args: &[&str]) -> String {
        let o = self.git_in(&self.dir, args);
        assert!(o.status.success(), "git {args:?}: {}", show(&o));
        text(&o.stdout)
    }

    /// `veilfs run -q -- sh -c SCRIPT` from the workspace root, to completion.
    fn sh(&self, script: &str) -> Output {
        Command::new(env!("CARGO_BIN_EXE_veilfs"))
            // The upstream, the linked worktree and the markers lie outside the
            // workspace, in the shared /tmp.
            .args(["run", "-q", "--share-tmp", "--", "sh", "-c", script])
            .current_dir(&self.dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap()
    }
}

/// The files `git rebase -i` leaves in `rebase-merge/` when it stops at `break`
/// with `exec touch MARKER` queued, written by a shell script into the directory
/// `$1` (made here) of the repository it runs in.
fn plant_rebase_script(marker: &Path) -> String {
    format!(
        r#"plant() {{
  mkdir -p "$1" || return 1
  onto=$(git rev-parse HEAD~1) && head=$(git rev-parse HEAD) || return 1
  git symbolic-ref HEAD > "$1/head-name" &&
  echo "$onto" > "$1/onto" && echo "$head" > "$1/orig-head" &&
  : > "$1/interactive" && : > "$1/quiet" && echo 1 > "$1/msgnum" && echo 3 > "$1/end" &&
  echo break > "$1/done" &&
  printf 'exec touch {m}\npick %s two\n' "$head" > "$1/git-rebase-todo"
}}
"#,
        m = marker.display()
    )
}

/// A sequence editor (outside the workspace) that has `git rebase -i` stop at
/// `break` with `exec touch MARKER` queued before the last commit's `pick`.
fn sequence_editor(r: &Repo, marker: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let e = r.outside("sequence-editor");
    std::fs::write(
        &e,
        format!(
            "#!/bin/sh\nprintf 'break\\nexec touch {}\\npick %s x\\n' \"$(git rev-parse HEAD)\" > \"$1\"\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&e, std::fs::Permissions::from_mode(0o755)).unwrap();
    e
}

/// The person, outside and afterwards: `git status` (which tells them to run
/// `git rebase --continue` when a rebase is stopped) and `git rebase --continue`.
/// Nothing the command planted may run, and no rebase is left in the real git
/// directory. `Err` says what went wrong.
fn nothing_runs_outside(
    r: &Repo,
    dir: &Path,
    marker: &Path,
    inside: &Output,
) -> Result<(), String> {
    let gitdir = r.git_in(dir, &["rev-parse", "--absolute-git-dir"]);
    let gitdir = PathBuf::from(text(&gitdir.stdout).trim());
    let planted = gitdir.join("rebase-merge").exists();
    let status = r.git_in(dir, &["status"]);
    let cont = r.git_in(dir, &["rebase", "--continue"]);
    let ran = marker.exists();
    if ran || planted || text(&status.stdout).contains("rebase in progress") {
        return Err(format!(
            "{}{}\ninside: {}\ngit status: {}\nrebase --continue: {}",
            if ran {
                "the planted exec ran outside; "
            } else {
                ""
            },
            if planted {
                "the real git directory held a rebase"
            } else {
                ""
            },
            show(inside),
            show(&status),
            show(&cont)
        ));
    }
    Ok(())
}

/// Panics listing every `(attack, what went wrong)` in `failed`.
#[track_caller]
fn none_failed(failed: Vec<(String, String)>) {
    if !failed.is_empty() {
        let all: Vec<String> = failed.iter().map(|(w, e)| format!("== {w}: {e}")).collect();
        let names: Vec<&str> = failed.iter().map(|(w, _)| w.as_str()).collect();
        panic!(
            "{} attacks worked: {names:?}\n{}",
            failed.len(),
            all.join("\n")
        );
    }
}

/// The issue's reproducer: the command leaves an interactive rebase stopped at
/// `break` with an `exec` line queued, by writing `.git/rebase-merge/` itself, by
/// renaming a directory made elsewhere in the workspace there, or by running
/// `git rebase -i`; the person's `git rebase --continue` afterwards must run
/// nothing (it ran the planted command before: attacker pass on issue 28).
#[test]
fn a_rebase_planted_in_the_session_runs_nothing_outside() {
    let attacks = [
        ("mkdir and write", "plant .git/rebase-merge"),
        (
            "rename a directory made in the workspace",
            "plant staged && mv staged .git/rebase-merge",
        ),
        (
            "rename into an existing allowed directory, then out of it",
            "plant .git/refs/staged; mv .git/refs/staged .git/rebase-merge",
        ),
        (
            "git rebase -i with a sequence editor",
            "GIT_SEQUENCE_EDITOR=\"$E\" git rebase -q -i HEAD~1",
        ),
        (
            "git rebase -i in a clone outside the workspace, the state moved in",
            "git clone -q . ../outside/own && (cd ../outside/own && git checkout -q main && \
             GIT_SEQUENCE_EDITOR=\"$E\" git rebase -q -i HEAD~1); \
             mv ../outside/own/.git/rebase-merge .git/rebase-merge",
        ),
    ];
    let mut failed = Vec::new();
    for (what, attack) in attacks {
        let r = Repo::new();
        let marker = r.outside("pwned");
        let script = format!(
            "E='{e}'\n{plant}{attack}\necho attack-ended\n",
            e = sequence_editor(&r, &marker).display(),
            plant = plant_rebase_script(&marker),
        );
        let o = r.sh(&script);
        assert!(
            text(&o.stdout).contains("attack-ended"),
            "{what}: {}",
            show(&o)
        );
        if let Err(e) = nothing_runs_outside(&r, &r.dir, &marker, &o) {
            failed.push((what.to_string(), e));
        }
    }
    none_failed(failed);
}

/// Every other file git reads as instructions is the same door: refused however it
/// is made (written, renamed or exchanged into place, linked, a symbolic link),
/// and the existing ones are not truncated, rewritten or chmod-ed.
#[test]
fn no_file_git_obeys_can_be_planted_in_the_git_directory() {
    let r = Repo::new();
    let marker = r.outside("pwned");
    std::fs::write(r.dir.join(".git/info/exclude"), "# original\n").unwrap();
    let before = common::snapshot(&r.dir.join(".git"));
    let script = format!(
        r#"
M='{m}'
try() {{ if sh -c "$1" 2>/dev/null; then echo "ATTACK-WORKED: $2"; else echo "refused: $2"; fi; }}
mkdir -p stage/info stage/alt && echo '* filter=lfs diff=evil' > stage/info/attributes && echo /tmp > stage/alt/alternates
echo '/tmp/elsewhere/objects' > alt.txt
try "rmdir .git/objects/info && mv stage/alt .git/objects/info" "objects/info replaced by a directory holding alternates"
try "rm -rf .git/objects/info; ln -s /tmp .git/objects/info" "objects/info replaced by a link"
mkdir -p .git/objects/info
try "echo /tmp/o > .git/objects/info/alternates" "objects/info/alternates written"
try "echo http://x/ > .git/objects/info/http-alternates" "objects/info/http-alternates written"
try "cp alt.txt .git/objects/info/alt.tmp && mv .git/objects/info/alt.tmp .git/objects/info/alternates" "objects/info/alternates renamed into place"
rm -f .git/objects/info/alt.tmp
try "mv alt.txt .git/objects/info/alternates" "objects/info/alternates moved in"
try "ln stage/alt/alternates .git/objects/info/alternates" "objects/info/alternates hard-linked"
try "echo '* filter=lfs' > .git/info/attributes" "info/attributes written"
try "python3 -c 'import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); sys.exit(l.renameat2(-100, b\"stage/info\", -100, b\".git/info\", 2) != 0)'" "info exchanged with a directory holding attributes"
try "echo '*.c' > .git/info/sparse-checkout" "info/sparse-checkout written"
try "echo '/x' >> .git/info/exclude" "info/exclude appended"
try ": > .git/info/exclude" "info/exclude truncated"
try "chmod 666 .git/info/exclude" "info/exclude chmod"
try "echo evil > .git/description" "description rewritten"
try "mkdir -p .git/rebase-apply && echo 1 > .git/rebase-apply/next" "rebase-apply made"
try "mkdir -p .git/sequencer && printf 'exec touch $M\n' > .git/sequencer/todo" "sequencer/todo made"
try "echo 0000000000000000000000000000000000000000 > .git/shallow" "shallow written"
try "mkdir -p .git/branches && echo /tmp/x > .git/branches/x" "branches/ written"
try "mkdir -p .git/remotes && echo 'URL: /tmp/x' > .git/remotes/x" "remotes/ written"
try "echo x > .git/info/grafts" "info/grafts written"
try "echo x > .git/newfile" "a new name in .git"
try "mkdir .git/newdir" "a new directory in .git"
try "mkdir -p .git/rr-cache/x" "rr-cache made"
try "mkfifo .git/SQUASH_MSG" "a fifo at an allowed name"
try "ln -s ../a.txt .git/MERGE_MSG" "a link at an allowed name"
try "ln -s ../../../../a.txt .git/logs/refs/heads/linked" "a link in logs"
try "ln -s ../../a.txt .git/refs/heads/linked" "a link in refs"
try "mkdir -p stage2/x && ln -s /tmp stage2/x/l && mv stage2 .git/refs/stage2" "a directory holding a link moved into refs"
try "mkdir -p .git/hooks2 && mv .git/hooks2 .git/hooks" "hooks replaced"
echo attack-ended
"#,
        m = marker.display()
    );
    let o = r.sh(&script);
    let out = text(&o.stdout);
    assert!(out.contains("attack-ended"), "{}", show(&o));
    assert!(!out.contains("ATTACK-WORKED"), "{}", show(&o));
    // Nothing new, and nothing changed but the times of `objects` (whose `info`
    // the command may remove and make again).
    let after = common::snapshot(&r.dir.join(".git"));
    let names = |m: &std::collections::BTreeMap<Vec<u8>, String>| {
        m.keys()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&before), names(&after), "{}", show(&o));
    let kept = |m: &std::collections::BTreeMap<Vec<u8>, String>| {
        m.iter()
            .filter(|(k, _)| !k.starts_with(b"objects"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(kept(&before), kept(&after), "{}", show(&o));
    // The person's git outside runs nothing and sees no sequence to continue.
    let cp = r.git_in(&r.dir, &["cherry-pick", "--continue"]);
    let st = r.git_in(&r.dir, &["status"]);
    assert!(!marker.exists(), "{} {}", show(&cp), show(&st));
}

/// Everyday git inside the session works: commit, branch, checkout, merge (with a
/// conflict resolved), stash, fetch from a local repository, tags, a single
/// cherry-pick and revert, reset, gc, `worktree list`, and the same in a
/// submodule's repository and a linked worktree's. What the rule refuses is said:
/// an interactive or plain rebase, `git am`, a multi-commit cherry-pick, `git
/// worktree add`.
#[test]
fn everyday_git_works_in_the_session_and_sequences_are_refused() {
    let r = Repo::new();
    let up = r.outside("upstream");
    std::fs::create_dir_all(&up).unwrap();
    r.git_in(&up, &["init", "-q", "-b", "main"]);
    std::fs::write(up.join("u.txt"), "u\n").unwrap();
    assert!(r.git_in(&up, &["add", "u.txt"]).status.success());
    assert!(r.git_in(&up, &["commit", "-qm", "up"]).status.success());
    let o = r.git_in(
        &r.dir,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            up.to_str().unwrap(),
            "sub",
        ],
    );
    assert!(o.status.success(), "{}", show(&o));
    r.git(&["commit", "-qm", "sub"]);
    let wt = r.outside("wt");
    r.git(&["worktree", "add", "-q", "-b", "wtb", wt.to_str().unwrap()]);
    let script = format!(
        r#"
ok() {{ if sh -c "$1" >/dev/null 2>/tmp/veilfs-rungit-err.$$; then echo "OK: $2"; else echo "FAILED: $2: $(tail -3 /tmp/veilfs-rungit-err.$$)"; fi; rm -f /tmp/veilfs-rungit-err.$$; }}
no() {{ if sh -c "$1" >/dev/null 2>&1; then echo "WORKED: $2"; else echo "REFUSED: $2"; fi; sh -c "$3" >/dev/null 2>&1; }}
ok "echo c >> a.txt && git commit -qam three" "commit"
ok "git commit -q --amend -m three-amended" "amend"
ok "git branch topic && git checkout -q topic && echo t > t.txt && git add t.txt && git commit -qm topic" "branch and checkout"
ok "git checkout -q main && git merge -q --no-edit topic" "merge"
ok "git checkout -q -b c1 && echo x > a.txt && git commit -qam x && git checkout -q main && echo y > a.txt && git commit -qam y && ! git merge -q c1 && echo z > a.txt && git add a.txt && git commit -q --no-edit" "merge with a conflict, resolved"
ok "echo s >> b.txt && git stash -q && git stash list | grep -q stash && git stash pop -q && git checkout -q b.txt" "stash"
ok "git fetch -q {up} main && git rev-parse -q --verify FETCH_HEAD" "fetch from a local repository"
ok "git tag v1 && git tag -a v2 -m v2" "tag"
ok "git checkout -q -b cpb && for f in p q r; do echo \$f > \$f.txt && git add \$f.txt && git commit -qm \$f || exit 1; done && git checkout -q main" "commits on another branch"
ok "git cherry-pick cpb~2" "single cherry-pick"
ok "git revert --no-edit HEAD" "single revert"
ok "git reset -q --hard HEAD~1 && git rev-parse -q --verify ORIG_HEAD" "reset"
ok "git gc -q" "gc"
ok "git worktree list | grep -q wtb" "worktree list"
ok "cd sub && git checkout -q -b s && echo s > s.txt && git add s.txt && git commit -qm s" "commit in a submodule"
ok "cd {wt} && echo w > w.txt && git add w.txt && git commit -qm w && git checkout -q -b wt2" "commit and checkout in a linked worktree"
ok "git status --short" "status"
no "GIT_SEQUENCE_EDITOR=true git rebase -q -i HEAD~1" "rebase -i" "git rebase --abort"
no "git rebase -q cpb" "rebase" "git rebase --abort"
no "git format-patch -1 --stdout cpb > ../outside/p.patch && git am -q ../outside/p.patch" "am" "git am --abort"
no "git cherry-pick c1~1 c1" "multi-commit cherry-pick" "git cherry-pick --abort"
no "git worktree add -q ../wt-new" "worktree add" "true"
no "cd sub && GIT_SEQUENCE_EDITOR=true git rebase -q -i HEAD~1" "rebase -i in a submodule" "git rebase --abort"
no "cd {wt} && GIT_SEQUENCE_EDITOR=true git rebase -q -i HEAD~1" "rebase -i in a linked worktree" "git rebase --abort"
echo session-ended
"#,
        up = up.display(),
        wt = wt.display()
    );
    let o = r.sh(&script);
    let out = text(&o.stdout);
    eprintln!("{out}");
    assert!(out.contains("session-ended"), "{}", show(&o));
    assert!(!out.contains("FAILED"), "{}", show(&o));
    assert!(!out.contains("WORKED"), "{}", show(&o));
    for gitdir in [
        r.dir.join(".git"),
        r.dir.join(".git/modules/sub"),
        r.dir.join(".git/worktrees/wt"),
    ] {
        for state in ["rebase-merge", "rebase-apply", "sequencer"] {
            assert!(
                !gitdir.join(state).exists(),
                "{}/{state}: {}",
                gitdir.display(),
                show(&o)
            );
        }
    }
    // The person's git outside still works, and has what the session did.
    r.git(&["fsck", "--no-progress"]);
    assert!(r.git(&["tag"]).contains("v2"));
    r.git(&["-C", "sub", "rev-parse", "-q", "--verify", "s"]);
}

/// The same rule in a submodule's repository (`.git/modules/sub`) and a linked
/// worktree's (`.git/worktrees/wt`): a rebase planted there runs nothing when the
/// person continues it in the submodule or the worktree.
#[test]
fn a_rebase_planted_for_a_submodule_or_a_linked_worktree_runs_nothing() {
    let r = Repo::new();
    let up = r.outside("upstream");
    std::fs::create_dir_all(&up).unwrap();
    r.git_in(&up, &["init", "-q", "-b", "main"]);
    for n in ["1", "2"] {
        std::fs::write(up.join("u.txt"), n).unwrap();
        assert!(r.git_in(&up, &["add", "u.txt"]).status.success());
        assert!(r.git_in(&up, &["commit", "-qm", n]).status.success());
    }
    let o = r.git_in(
        &r.dir,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            up.to_str().unwrap(),
            "sub",
        ],
    );
    assert!(o.status.success(), "{}", show(&o));
    let o = r.git_in(&r.dir.join("sub"), &["checkout", "-q", "-B", "main"]);
    assert!(o.status.success(), "{}", show(&o));
    let wt = r.outside("wt");
    r.git(&["worktree", "add", "-q", "-b", "wtb", wt.to_str().unwrap()]);
    let mut failed = Vec::new();
    for (what, dir, gitdir) in [
        ("submodule", r.dir.join("sub"), ".git/modules/sub"),
        ("linked worktree", wt.clone(), ".git/worktrees/wt"),
    ] {
        let marker = r.outside(&format!("pwned-{}", what.replace(' ', "-")));
        let script = format!(
            "{plant}cd '{d}' && plant '{ws}/{g}/rebase-merge'; \
             cd '{d}' && plant '{ws}/staged'; mv '{ws}/staged' '{ws}/{g}/rebase-merge'; \
             cd '{d}' && GIT_SEQUENCE_EDITOR='{e}' git rebase -q -i HEAD~1; echo attack-ended",
            plant = plant_rebase_script(&marker),
            d = dir.display(),
            ws = r.dir.display(),
            g = gitdir,
            e = sequence_editor(&r, &marker).display(),
        );
        let o = r.sh(&script);
        assert!(
            text(&o.stdout).contains("attack-ended"),
            "{what}: {}",
            show(&o)
        );
        if let Err(e) = nothing_runs_outside(&r, &dir, &marker, &o) {
            failed.push((what.to_string(), e));
        }
    }
    none_failed(failed);
}
