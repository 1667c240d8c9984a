"""Where the device scripts run their commands: a phone over adb, or this machine.

Both runners offer the same operations on a device folder (the folder the binaries, models and
texts are pushed into, and where the tools run):

  shell(command)    runs a POSIX shell command with the device folder as working directory
  tool(name)        the command line prefix that starts a pushed binary (``./bench``, or
                    ``qemu-aarch64 -L /usr/aarch64-linux-gnu ./bench`` for a cross build here)
  push / pull       copy a file to or from the device folder
  file_digest       size and sha256 of a file there (None when it is missing)
  spawn / kill      a background load that runs while a measurement does

``device_facts`` reads the SoC, the cores, governors, temperatures and the battery from /sys,
/proc and Android's properties through the same runner, and tolerates whatever is missing.
"""

import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import time


class DeviceError(Exception):
    """A failure the scripts report as one line (exit code 1)."""


def quote(text):
    return shlex.quote(str(text))


class Result:
    """What a shell command gave: exit code, stdout and stderr as text, seconds taken."""

    def __init__(self, rc, stdout, stderr, seconds):
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.seconds = seconds


def run_process(argv, timeout, what):
    """Runs argv, returns a Result; a missing program or a timeout is a DeviceError."""
    started = time.monotonic()
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout)
    except FileNotFoundError:
        raise DeviceError(f"{what}: '{argv[0]}' not found")
    except subprocess.TimeoutExpired:
        raise DeviceError(f"{what}: no answer after {timeout} s: {shlex.join(argv)[:200]}")
    return Result(done.returncode, done.stdout.decode("utf-8", "replace"),
                  done.stderr.decode("utf-8", "replace"), time.monotonic() - started)


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# A background loop that keeps one core busy: the same command on a phone and here.
BUSY_LOOP = "while :; do :; done"

# Prints the size and sha256 of one file, or nothing when it is missing. Android's toybox has
# sha256sum (Android 6+); busybox and GNU coreutils too.
DIGEST_COMMAND = ("f={path}; [ -f \"$f\" ] && echo \"$(wc -c < \"$f\") $(sha256sum \"$f\" | "
                  "cut -d' ' -f1)\"")


class Runner:
    """The operations shared by both runners; subclasses give _shell_argv, push and pull."""

    kind = "?"
    timeout = 3600
    facts_root = ""

    def __init__(self, device_dir):
        self.device_dir = device_dir

    def describe(self):
        """The runner as the manifest records it."""
        return {"kind": self.kind, "device_dir": self.device_dir}

    def shell(self, command, timeout=None):
        """Runs a shell command in the device folder; returns a Result (any exit code)."""
        return run_process(self._shell_argv(f"cd {quote(self.device_dir)} && {command}"),
                           timeout or self.timeout, self.kind)

    def shell_raw(self, command, timeout=None):
        """Runs a shell command from the runner's default folder (the folder may not exist)."""
        return run_process(self._shell_argv(command), timeout or self.timeout, self.kind)

    def tool(self, name):
        """The command that starts binary `name` pushed into the device folder."""
        return "./" + quote(name)

    def make_dir(self):
        result = self.shell_raw(f"mkdir -p {quote(self.device_dir)}", timeout=60)
        if result.rc != 0:
            raise DeviceError(f"cannot create {self.device_dir} on the {self.kind} target: "
                              f"{(result.stderr or result.stdout).strip()}")

    def file_digest(self, name):
        """(size, sha256) of a file in the device folder, or None when it is not there."""
        result = self.shell(DIGEST_COMMAND.format(path=quote(name)), timeout=600)
        fields = result.stdout.split()
        if result.rc != 0 or len(fields) != 2 or not fields[0].isdigit():
            return None
        return int(fields[0]), fields[1]

    def read_text(self, name):
        """The text of a file in the device folder, or None when it is missing."""
        result = self.shell(f"cat {quote(name)} 2>/dev/null", timeout=120)
        return result.stdout if result.rc == 0 else None

    def spawn(self, command):
        """Starts a command in the background on the target; returns a handle for kill()."""
        # Not through shell(): its `cd DIR &&` would put the whole list in a background subshell
        # and $! would name that subshell, not the command that kill() must stop.
        result = self.shell_raw(f"nohup sh -c {quote(command)} > /dev/null 2>&1 & echo $!",
                                timeout=60)
        pid = result.stdout.strip()
        if result.rc != 0 or not pid.isdigit():
            raise DeviceError(f"could not start a background command on the {self.kind} target: "
                              f"{(result.stderr or result.stdout).strip()}")
        return int(pid)

    def kill(self, handle):
        self.shell_raw(f"kill {handle} 2>/dev/null", timeout=60)


class AdbRunner(Runner):
    """A phone (or board) over adb; `serial` picks one of several (adb -s)."""

    kind = "adb"

    def __init__(self, device_dir, serial=None, adb="adb"):
        super().__init__(device_dir)
        self.prefix = [adb] + (["-s", serial] if serial else [])
        self.serial = serial

    def describe(self):
        return dict(super().describe(), serial=self.serial)

    def _shell_argv(self, command):
        # adb joins its arguments with spaces and hands the line to the device's sh.
        return self.prefix + ["shell", command]

    def check_connected(self):
        result = run_process(self.prefix + ["get-state"], 60, "adb")
        if result.rc != 0 or result.stdout.strip() != "device":
            raise DeviceError("adb: no device ready (" + (result.stderr or result.stdout).strip()
                              + "); `adb devices` lists them, -s SERIAL picks one")

    def push(self, local, name):
        result = run_process(self.prefix + ["push", local, self.device_dir + "/" + name],
                             self.timeout, "adb push")
        if result.rc != 0:
            raise DeviceError(f"adb push {local}: {(result.stderr or result.stdout).strip()}")

    def pull(self, name, local):
        result = run_process(self.prefix + ["pull", self.device_dir + "/" + name, local],
                             self.timeout, "adb pull")
        if result.rc != 0:
            raise DeviceError(f"adb pull {name}: {(result.stderr or result.stdout).strip()}")


class LocalRunner(Runner):
    """This machine: the device folder is a local folder; `emulator` (e.g. qemu-aarch64 with its
    sysroot) starts each binary, so a cross build runs the same commands."""

    kind = "local"

    def __init__(self, device_dir, emulator=None):
        super().__init__(os.path.abspath(device_dir))
        self.emulator = emulator or []
        self.background = {}
        # EDGELM_FACTS_ROOT: read /proc and /sys under this folder instead (a copy of a phone's,
        # or the fake tree of the tests).
        self.facts_root = os.environ.get("EDGELM_FACTS_ROOT", "")

    def describe(self):
        return dict(super().describe(), emulator=shlex.join(self.emulator) or None)

    def _shell_argv(self, command):
        return ["sh", "-c", command]

    def tool(self, name):
        return " ".join([quote(word) for word in self.emulator] + ["./" + quote(name)])

    def push(self, local, name):
        try:
            shutil.copyfile(local, os.path.join(self.device_dir, name))
        except OSError as error:
            raise DeviceError(f"copy {local} to {self.device_dir}: {error.strerror}")

    def pull(self, name, local):
        try:
            shutil.copyfile(os.path.join(self.device_dir, name), local)
        except OSError as error:
            raise DeviceError(f"copy {name} from {self.device_dir}: {error.strerror}")

    def spawn(self, command):
        # A process group of its own, so kill() stops the loop and nothing else.
        process = subprocess.Popen(["sh", "-c", command], cwd=self.device_dir,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
        self.background[process.pid] = process
        return process.pid

    def kill(self, handle):
        process = self.background.pop(handle)
        os.killpg(process.pid, signal.SIGTERM)
        process.wait()


QEMU_AARCH64 = ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]


def add_runner_arguments(parser):
    """The flags that pick a runner, the same in every device script."""
    where = parser.add_argument_group("target")
    where.add_argument("-s", "--serial", help="adb serial of the phone (adb devices)")
    where.add_argument("--device-dir", default="/data/local/tmp/edgelm",
                       help="folder on the target (default /data/local/tmp/edgelm; with --local "
                            "a folder here, default build/device-local)")
    where.add_argument("--local", action="store_true",
                       help="run the same commands on this machine instead of a phone")
    where.add_argument("--qemu", action="store_true",
                       help="with --local: start the binaries under qemu-aarch64 -L "
                            "/usr/aarch64-linux-gnu (an aarch64 cross build)")
    where.add_argument("--adb", default="adb", help="the adb program (default adb)")


def make_runner(args):
    """The runner the flags of add_runner_arguments name."""
    if args.qemu and not args.local:
        raise DeviceError("--qemu runs a cross build on this machine: it needs --local")
    if args.local:
        folder = args.device_dir
        if folder == "/data/local/tmp/edgelm":
            folder = "build/device-local"
        return LocalRunner(folder, QEMU_AARCH64 if args.qemu else None)
    runner = AdbRunner(args.device_dir, args.serial, args.adb)
    runner.check_connected()
    return runner


# ---------------------------------------------------------------------------------------------
# Device facts

# One shell command prints every source as "==> NAME" followed by its text; a file or program
# that is missing prints nothing after its marker, so each source is optional.
FACT_FILES = [
    "/proc/cpuinfo", "/proc/meminfo", "/proc/version",
    "/sys/devices/system/cpu/cpu*/cpufreq/cpuinfo_max_freq",
    "/sys/devices/system/cpu/cpu*/cpufreq/scaling_max_freq",
    "/sys/devices/system/cpu/cpu*/cpufreq/scaling_cur_freq",
    "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
    "/sys/devices/system/cpu/cpu*/cpu_capacity",
    "/sys/devices/system/cpu/online",
    "/sys/class/thermal/thermal_zone*/type", "/sys/class/thermal/thermal_zone*/temp",
    "/sys/class/power_supply/*/type", "/sys/class/power_supply/*/capacity",
    "/sys/class/power_supply/*/status", "/sys/class/power_supply/*/temp",
]
PROPERTIES = ["ro.product.manufacturer", "ro.product.model", "ro.soc.manufacturer",
              "ro.soc.model", "ro.board.platform", "ro.hardware", "ro.build.version.release",
              "ro.build.version.sdk"]

# CPU part numbers of Arm's cores as /proc/cpuinfo gives them (implementer 0x41), for a readable
# CPU model where the kernel prints no "model name".
ARM_PARTS = {
    "0xd03": "Cortex-A53", "0xd04": "Cortex-A35", "0xd05": "Cortex-A55", "0xd07": "Cortex-A57",
    "0xd08": "Cortex-A72", "0xd09": "Cortex-A73", "0xd0a": "Cortex-A75", "0xd0b": "Cortex-A76",
    "0xd0d": "Cortex-A77", "0xd41": "Cortex-A78", "0xd44": "Cortex-X1", "0xd46": "Cortex-A510",
    "0xd47": "Cortex-A710", "0xd48": "Cortex-X2", "0xd4d": "Cortex-A715", "0xd4e": "Cortex-X3",
    "0xd80": "Cortex-A520", "0xd81": "Cortex-A720", "0xd82": "Cortex-X4", "0xd85": "Cortex-X925",
    "0xd87": "Cortex-A725",
}


def facts_command(root=""):
    """The shell command that prints every fact source; `root` is prepended to the paths (a copy
    of a device's /proc and /sys) and left out of the names printed."""
    parts = [f"root={quote(root)}"]
    for pattern in FACT_FILES:
        parts.append(f"for f in \"$root\"{pattern}; do [ -r \"$f\" ] && "
                     "echo \"==> ${f#\"$root\"}\" && cat \"$f\"; done")
    parts.append("echo '==> uname'; uname -m")
    parts.append("if command -v getprop > /dev/null; then for p in " + " ".join(PROPERTIES) +
                 "; do echo \"==> prop:$p\"; getprop $p; done; fi")
    return "; ".join(parts) + "; true"


def parse_sections(text):
    sections = {}
    name = None
    for line in text.splitlines():
        if line.startswith("==> "):
            name = line[4:].strip()
            sections[name] = []
        elif name is not None:
            sections[name].append(line)
    return {key: "\n".join(lines).strip() for key, lines in sections.items()}


def number(text):
    try:
        return int(text.strip())
    except (ValueError, AttributeError):
        return None


def celsius(raw):
    """Thermal zones report millidegrees; some drivers give degrees or tenths."""
    value = number(raw)
    if value is None:
        return None
    if abs(value) >= 1000:
        return value / 1000.0
    if abs(value) >= 200:
        return value / 10.0
    return float(value)


def parse_facts(text):
    """The facts in the output of facts_command(): a dict, None where a source was missing."""
    sections = parse_sections(text)
    cpuinfo = sections.get("/proc/cpuinfo", "")
    props = {key[5:]: value for key, value in sections.items() if key.startswith("prop:") and value}

    model_names, parts, hardware = [], [], None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name":
            model_names.append(value)
        elif key == "CPU part":
            parts.append(ARM_PARTS.get(value.lower(), "part " + value))
        elif key == "Hardware":
            hardware = value
    cpu_model = None
    names = model_names or parts
    if names:
        counts = {}
        for name in names:
            counts[name] = counts.get(name, 0) + 1
        cpu_model = " + ".join(f"{n}x {name}" if n > 1 else name for name, n in counts.items())

    soc = None
    if props.get("ro.soc.model"):
        soc = " ".join(filter(None, [props.get("ro.soc.manufacturer"), props["ro.soc.model"]]))
    else:
        soc = props.get("ro.board.platform") or hardware

    cores = {}
    for key, value in sections.items():
        match = re.match(r"/sys/devices/system/cpu/cpu(\d+)/(?:cpufreq/)?(\w+)$", key)
        if match:
            cores.setdefault(int(match.group(1)), {})[match.group(2)] = value
    core_list = []
    for cpu in sorted(cores):
        entry = cores[cpu]
        core_list.append({
            "cpu": cpu,
            "max_khz": number(entry.get("cpuinfo_max_freq")),
            "scaling_max_khz": number(entry.get("scaling_max_freq")),
            "cur_khz": number(entry.get("scaling_cur_freq")),
            "governor": entry.get("governor") or entry.get("scaling_governor"),
            "capacity": number(entry.get("cpu_capacity")),
        })
    clusters = {}
    for core in core_list:
        if core["max_khz"]:
            clusters.setdefault(core["max_khz"], []).append(core["cpu"])

    zones = {}
    for key, value in sections.items():
        match = re.match(r"/sys/class/thermal/thermal_zone(\d+)/(type|temp)$", key)
        if match:
            zones.setdefault(int(match.group(1)), {})[match.group(2)] = value
    temperatures = []
    for zone in sorted(zones):
        degrees = celsius(zones[zone].get("temp"))
        if degrees is not None:
            temperatures.append({"zone": zone, "type": zones[zone].get("type") or f"zone{zone}",
                                 "celsius": degrees})

    supplies = {}
    for key, value in sections.items():
        match = re.match(r"/sys/class/power_supply/([^/]+)/(type|capacity|status|temp)$", key)
        if match:
            supplies.setdefault(match.group(1), {})[match.group(2)] = value
    battery = None
    for name, supply in sorted(supplies.items()):
        if supply.get("type", "").lower() == "battery" or name.lower() == "battery":
            battery = {"name": name, "level_percent": number(supply.get("capacity")),
                       "status": supply.get("status") or None,
                       "celsius": (number(supply["temp"]) / 10.0
                                   if number(supply.get("temp")) is not None else None)}
            break

    mem_total = None
    match = re.search(r"MemTotal:\s+(\d+) kB", sections.get("/proc/meminfo", ""))
    if match:
        mem_total = int(match.group(1)) * 1024
    governors = sorted({c["governor"] for c in core_list if c["governor"]})
    device = " ".join(filter(None, [props.get("ro.product.manufacturer"),
                                    props.get("ro.product.model")])) or None
    return {
        "device": device,
        "android": props.get("ro.build.version.release"),
        "sdk": number(props.get("ro.build.version.sdk", "")),
        "soc": soc,
        "cpu_model": cpu_model,
        "arch": sections.get("uname") or None,
        "kernel": sections.get("/proc/version") or None,
        "n_cpus": len(core_list) or (len(model_names or parts) or None),
        "online": sections.get("/sys/devices/system/cpu/online") or None,
        "cores": core_list,
        "clusters": [{"max_khz": khz, "cpus": cpus} for khz, cpus in sorted(clusters.items())],
        "governors": governors,
        "temperatures": temperatures,
        "battery": battery,
        "mem_total_bytes": mem_total,
    }


def device_facts(runner):
    """The target's facts now (parse_facts); an unreadable source leaves its field None."""
    result = runner.shell_raw(facts_command(runner.facts_root), timeout=120)
    facts = parse_facts(result.stdout)
    facts["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return facts


def max_temperature(facts):
    values = [t["celsius"] for t in facts.get("temperatures") or []]
    return max(values) if values else None


def wait_until_cool(runner, limit, most_seconds, log):
    """Waits (up to most_seconds) until no thermal zone is above `limit` °C; returns the facts."""
    waited = 0.0
    while True:
        facts = device_facts(runner)
        hottest = max_temperature(facts)
        if hottest is None or hottest <= limit or waited >= most_seconds:
            if hottest is not None and hottest > limit:
                log(f"still {hottest:.1f} °C after {waited:.0f} s; going on")
            return facts
        log(f"{hottest:.1f} °C > {limit} °C: waiting")
        time.sleep(10)
        waited += 10
