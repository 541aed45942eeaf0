//! The workspace on disk, as veilfs reads it before and beside the mount: finding
//! the workspace and loading its policy ([`load`]), the ignore files a policy
//! imports ([`imports`], the I/O half of the policy's imports), the paths
//! git's index lists ([`git_index`]), and one walk deciding every path ([`walk`]).

pub mod git_index;
pub mod imports;
pub mod load;
pub mod tracked;
pub mod walk;
pub mod ways;
