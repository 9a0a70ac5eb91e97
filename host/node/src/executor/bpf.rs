//! GPU device fencing on cgroup v2, which has no devices controller: a small eBPF program of
//! type `BPF_PROG_TYPE_CGROUP_DEVICE`, written here instruction by instruction, loaded with the
//! `bpf(2)` system call and attached to a task's cgroup directory. It denies every access to
//! the character devices of the deny list and allows everything else.
//!
//! Owns the program's instructions, their encoding and the two system calls (load, attach).
//! It does not decide what to deny (`devices.rs`) nor create the cgroup (`cgroup.rs`).
//!
//! The program, for a deny list `(M1, m1), (M2, m2), ...` (context `r1` is a
//! `struct bpf_cgroup_dev_ctx { u32 access_type; u32 major; u32 minor; }`, device type in the
//! low 16 bits of `access_type`):
//!
//! ```text
//!     r2 = *(u32 *)(r1 + 0); r2 &= 0xffff     ; device type
//!     r3 = *(u32 *)(r1 + 4)                   ; major
//!     r4 = *(u32 *)(r1 + 8)                   ; minor
//!     if r2 != CHAR goto allow
//!     if r3 != M1 goto +3; if r4 != m1 goto +2; r0 = 0; exit     ; one block per entry
//!     ...
//! allow:
//!     r0 = 1; exit
//! ```

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::devices::DeviceId;

/// One eBPF instruction (`struct bpf_insn`): opcode, destination and source registers (low and
/// high nibble), signed offset, signed immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insn {
    pub code: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    /// The 8 bytes the kernel reads (little-endian host).
    pub fn encode(self) -> [u8; 8] {
        let [o0, o1] = self.off.to_le_bytes();
        let [i0, i1, i2, i3] = self.imm.to_le_bytes();
        [
            self.code,
            (self.dst & 0x0f) | (self.src << 4),
            o0,
            o1,
            i0,
            i1,
            i2,
            i3,
        ]
    }
}

// Opcodes (linux/bpf_common.h, linux/bpf.h).
/// `BPF_LDX | BPF_MEM | BPF_W`: `dst = *(u32 *)(src + off)`.
const LDX_MEM_W: u8 = 0x61;
/// `BPF_ALU64 | BPF_AND | BPF_K`: `dst &= imm`.
const ALU64_AND_K: u8 = 0x57;
/// `BPF_ALU64 | BPF_MOV | BPF_K`: `dst = imm`.
const ALU64_MOV_K: u8 = 0xb7;
/// `BPF_JMP | BPF_JNE | BPF_K`: `if dst != imm goto pc + 1 + off`.
const JMP_JNE_K: u8 = 0x55;
/// `BPF_JMP | BPF_EXIT`.
const JMP_EXIT: u8 = 0x95;

/// `BPF_DEVCG_DEV_CHAR`.
const DEV_CHAR: i32 = 2;
/// `BPF_PROG_TYPE_CGROUP_DEVICE`.
const PROG_TYPE_CGROUP_DEVICE: u32 = 15;
/// `BPF_CGROUP_DEVICE` (attach type).
const ATTACH_CGROUP_DEVICE: u32 = 6;
/// `BPF_F_ALLOW_MULTI`: runs alongside programs attached to ancestors (e.g. systemd's).
const F_ALLOW_MULTI: u32 = 2;
/// `BPF_PROG_LOAD` and `BPF_PROG_ATTACH` commands.
const CMD_PROG_LOAD: libc::c_long = 5;
const CMD_PROG_ATTACH: libc::c_long = 8;

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        dst,
        src,
        off,
        imm,
    }
}

/// Why a device program could not be built, loaded or attached.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// More denied devices than one program's jumps can span.
    #[error("too many devices to deny in one BPF program: {0}")]
    TooMany(usize),
    /// A major or minor number does not fit an instruction's immediate.
    #[error("device number {0} does not fit a BPF immediate")]
    DeviceNumber(DeviceId),
    /// `bpf(BPF_PROG_LOAD)` failed (verifier log attached when there is one).
    #[error("cannot load the BPF device program: {source}{log}")]
    Load {
        /// The underlying error.
        #[source]
        source: io::Error,
        /// The verifier's log, prefixed with `; verifier: `, or empty.
        log: String,
    },
    /// The cgroup directory could not be opened, or `bpf(BPF_PROG_ATTACH)` failed.
    #[error("cannot attach the BPF device program to {path}: {source}")]
    Attach {
        /// The cgroup directory.
        path: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// The program that denies `denied` (char devices) and allows every other access.
pub(crate) fn device_program(denied: &[DeviceId]) -> Result<Vec<Insn>, BpfError> {
    let blocks = i16::try_from(denied.len() * 4)
        .ok()
        .filter(|b| *b < i16::MAX - 8)
        .ok_or(BpfError::TooMany(denied.len()))?;
    let imm = |v: u32, id: DeviceId| i32::try_from(v).map_err(|_| BpfError::DeviceNumber(id));
    let mut prog = vec![
        insn(LDX_MEM_W, 2, 1, 0, 0),
        insn(ALU64_AND_K, 2, 0, 0, 0xffff),
        insn(LDX_MEM_W, 3, 1, 4, 0),
        insn(LDX_MEM_W, 4, 1, 8, 0),
        insn(JMP_JNE_K, 2, 0, blocks, DEV_CHAR),
    ];
    for id in denied {
        prog.extend([
            insn(JMP_JNE_K, 3, 0, 3, imm(id.major, *id)?),
            insn(JMP_JNE_K, 4, 0, 2, imm(id.minor, *id)?),
            insn(ALU64_MOV_K, 0, 0, 0, 0),
            insn(JMP_EXIT, 0, 0, 0, 0),
        ]);
    }
    prog.extend([insn(ALU64_MOV_K, 0, 0, 0, 1), insn(JMP_EXIT, 0, 0, 0, 0)]);
    Ok(prog)
}

/// The first fields of `union bpf_attr` for `BPF_PROG_LOAD`.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// The first fields of `union bpf_attr` for `BPF_PROG_ATTACH`.
#[repr(C)]
struct ProgAttachAttr {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
}

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialised #[repr(C)] prefix of `union bpf_attr` and its size is
    // passed with it; the kernel reads at most that many bytes (treating the rest as zero) and
    // writes nothing back for these commands except into buffers the attr points to, which
    // outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            std::ptr::from_mut(attr).cast::<libc::c_void>(),
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Loads the program denying `denied`; returns its file descriptor.
pub(crate) fn load(denied: &[DeviceId]) -> Result<OwnedFd, BpfError> {
    let code: Vec<u8> = device_program(denied)?
        .into_iter()
        .flat_map(Insn::encode)
        .collect();
    let license = c"Apache-2.0";
    let mut log = vec![0u8; 4096];
    let mut name = [0u8; 16];
    name[..12].copy_from_slice(b"gantry_gpdev");
    let mut attr = ProgLoadAttr {
        prog_type: PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: (code.len() / 8) as u32,
        insns: code.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        prog_name: name,
        expected_attach_type: ATTACH_CGROUP_DEVICE,
        ..ProgLoadAttr::default()
    };
    let fd = bpf(CMD_PROG_LOAD, &mut attr).map_err(|source| {
        let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]).trim().to_owned();
        BpfError::Load {
            source,
            log: if text.is_empty() {
                String::new()
            } else {
                format!("; verifier: {text}")
            },
        }
    })?;
    // SAFETY: on success BPF_PROG_LOAD returns a new file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Loads the program denying `denied` and attaches it to the cgroup v2 directory `cgroup_dir`.
/// The attachment holds the program: it lives as long as the cgroup.
pub(crate) fn attach_device_filter(cgroup_dir: &Path, denied: &[DeviceId]) -> Result<(), BpfError> {
    let attach_err = |source| BpfError::Attach {
        path: cgroup_dir.display().to_string(),
        source,
    };
    let prog = load(denied)?;
    let dir = CString::new(cgroup_dir.as_os_str().as_bytes())
        .map_err(|e| attach_err(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
    // SAFETY: `dir` is a valid NUL-terminated path; open returns a new descriptor or -1.
    let raw = unsafe {
        libc::open(
            dir.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(attach_err(io::Error::last_os_error()));
    }
    // SAFETY: `raw` was just returned by open and is owned by nothing else.
    let cgroup = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut attr = ProgAttachAttr {
        target_fd: cgroup.as_raw_fd() as u32,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: ATTACH_CGROUP_DEVICE,
        attach_flags: F_ALLOW_MULTI,
    };
    bpf(CMD_PROG_ATTACH, &mut attr).map_err(attach_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_matches_the_kernel_layout() {
        // r2 = *(u32 *)(r1 + 4): code 0x61, dst 2 in the low nibble, src 1 in the high one.
        assert_eq!(
            insn(LDX_MEM_W, 2, 1, 4, 0).encode(),
            [0x61, 0x12, 4, 0, 0, 0, 0, 0]
        );
        // if r3 != 195 goto +3
        assert_eq!(
            insn(JMP_JNE_K, 3, 0, 3, 195).encode(),
            [0x55, 0x03, 3, 0, 195, 0, 0, 0]
        );
        // negative offsets and large immediates are little-endian two's complement
        assert_eq!(
            insn(JMP_JNE_K, 4, 0, -2, 0x0102_0304).encode(),
            [0x55, 0x04, 0xfe, 0xff, 4, 3, 2, 1]
        );
        assert_eq!(
            insn(JMP_EXIT, 0, 0, 0, 0).encode(),
            [0x95, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            insn(ALU64_MOV_K, 0, 0, 0, 1).encode(),
            [0xb7, 0, 0, 0, 1, 0, 0, 0]
        );
    }

    /// Runs `prog` on a device access the way the kernel would, following the jumps; returns r0.
    fn interpret(prog: &[Insn], dev_type: u32, major: u32, minor: u32) -> u64 {
        let ctx = [dev_type | (2 << 16), major, minor];
        let mut r = [0u64; 11];
        let mut pc = 0usize;
        for _ in 0..prog.len() + 1 {
            let i = prog[pc];
            let (dst, src) = (usize::from(i.dst), usize::from(i.src));
            pc += 1;
            match i.code {
                LDX_MEM_W => {
                    assert_eq!(src, 1, "loads only from the context");
                    r[dst] = u64::from(ctx[i.off as usize / 4]);
                }
                ALU64_AND_K => r[dst] &= i.imm as i64 as u64,
                ALU64_MOV_K => r[dst] = i.imm as i64 as u64,
                JMP_JNE_K if r[dst] != i.imm as i64 as u64 => {
                    pc = (pc as i64 + i64::from(i.off)) as usize;
                }
                JMP_JNE_K => {}
                JMP_EXIT => return r[0],
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
        panic!("program did not exit");
    }

    #[test]
    fn program_denies_exactly_the_listed_char_devices() {
        let denied = [
            DeviceId {
                major: 195,
                minor: 0,
            },
            DeviceId {
                major: 195,
                minor: 2,
            },
        ];
        let prog = device_program(&denied).unwrap();
        assert_eq!(prog.len(), 5 + 4 * denied.len() + 2);
        assert_eq!(prog[4].off, 8, "the type check jumps over both blocks");
        let char_dev = 2;
        assert_eq!(interpret(&prog, char_dev, 195, 0), 0);
        assert_eq!(interpret(&prog, char_dev, 195, 2), 0);
        assert_eq!(interpret(&prog, char_dev, 195, 1), 1, "a given GPU");
        assert_eq!(interpret(&prog, char_dev, 195, 255), 1, "nvidiactl");
        assert_eq!(interpret(&prog, char_dev, 1, 3), 1, "/dev/null");
        assert_eq!(interpret(&prog, char_dev, 0, 0), 1);
        assert_eq!(interpret(&prog, 1, 195, 0), 1, "a block device 195:0");
    }

    #[test]
    fn empty_deny_list_allows_everything() {
        let prog = device_program(&[]).unwrap();
        assert_eq!(prog.len(), 7);
        assert_eq!(interpret(&prog, 2, 195, 0), 1);
    }

    #[test]
    fn out_of_range_numbers_and_huge_lists_are_errors() {
        let big = DeviceId {
            major: u32::MAX,
            minor: 0,
        };
        assert!(matches!(
            device_program(&[big]),
            Err(BpfError::DeviceNumber(_))
        ));
        let many = vec![DeviceId { major: 1, minor: 1 }; 9000];
        assert!(matches!(
            device_program(&many),
            Err(BpfError::TooMany(9000))
        ));
    }
}
