#!/usr/bin/env python3
"""Estimated cycles per iteration of the work between two block profiles (tb_profile.c).

Usage: mca_estimate.py BINARY PROFILE_1 PROFILE_3 ITERATIONS_APART CPU [CPU ...]

The difference between the profiles (e.g. 3 iterations and 1 of a benchmark) is the work of the
iterations alone: its blocks and how often each ran. Blocks that QEMU cut where the code has no
branch are joined again (loop_bodies). Each block's instructions, disassembled from BINARY, go to
llvm-mca for the given CPU's pipeline model, which gives the block's cycles per run in a steady
state; the sum over blocks, times how often each ran, is the estimate, scaled up from the blocks
that cover 97 % of the instructions (blocks in shared libraries, such as memcpy, are among the
rest). It models the core only: data are assumed in L1, branches predicted. Prints one line:
instructions and cycles per iteration.
"""
import collections
import re
import subprocess
import sys


def read_profile(path):
    """(start of the program's code where it was loaded, {(vaddr, instructions): executions})."""
    runs = collections.defaultdict(int)
    with open(path) as f:
        start_code = int(f.readline().split()[1], 16)
        for line in f:
            vaddr, instructions, executions = line.split()
            runs[(int(vaddr, 16), int(instructions))] += int(executions)
    return start_code, runs


def code_segment(binary):
    """(address, size) of the binary's executable segment as the file gives it."""
    headers = subprocess.run(['readelf', '-lW', binary], capture_output=True, text=True,
                             check=True).stdout
    for line in headers.splitlines():
        fields = line.split()
        if fields and fields[0] == 'LOAD' and 'E' in fields[6:-1]:
            return int(fields[2], 16), int(fields[5], 16)
    sys.exit(f'mca_estimate: {binary} has no executable segment')


def block_text(binary, arch, vaddr, instructions):
    """The block's instructions as llvm-mca takes them, where the block ends, and whether its last
    instruction leaves it (a branch, call or return) rather than falling through."""
    objdump = 'aarch64-linux-gnu-objdump' if arch == 'aarch64' else 'objdump'
    # Up to 15 bytes per x86 instruction; one instruction past the block gives its end.
    span = 4 * (instructions + 1) if arch == 'aarch64' else 15 * (instructions + 1)
    listing = subprocess.run([objdump, '-d', '--no-show-raw-insn', f'--start-address={vaddr}',
                              f'--stop-address={vaddr + span}', binary],
                             capture_output=True, text=True, check=True).stdout
    lines, end, leaves = [], None, False
    for row in listing.splitlines():
        match = re.match(r'\s+([0-9a-f]+):\s+(.*)$', row)
        if not match:
            continue
        if len(lines) == instructions:
            end = int(match.group(1), 16)
            break
        comment = '//' if arch == 'aarch64' else '#'
        text = re.sub(r'\s+<[^>]*>', '', match.group(2).split(comment)[0]).strip()
        # Branches go to one label at the top (llvm-mca takes the block as a loop body); calls
        # and returns leave the block and are not modelled.
        if arch == 'aarch64':
            leaves = re.match(r'(b\.\w+|b|bl|blr|br|ret|cbz|cbnz|tbz|tbnz|svc)\b', text) is not None
            text = re.sub(r'^(b\.\w+|b|cbz|cbnz|tbz|tbnz)(\s+)(.*?)([0-9a-f]+)$',
                          lambda m: m.group(1) + m.group(2) + m.group(3) + 'top', text)
            if text.startswith(('bl ', 'blr', 'ret', 'br ', 'svc')):
                text = 'nop'
        else:
            leaves = re.match(r'(j\w+|call|ret|syscall)\b', text) is not None
            text = re.sub(r'^(j\w+)\s+[0-9a-f]+$', lambda m: m.group(1) + ' top', text)
            if text.startswith(('call', 'ret', 'jmp *', 'syscall')):
                text = 'nop'
        lines.append(text)
    return lines, end, leaves


def loop_bodies(binary, arch, blocks):
    """Joins blocks that QEMU cut where the code has no branch: it ends a block at a page boundary
    and when its translation buffer fills, which can cut a loop body in two. llvm-mca must see the
    body whole, or each part is priced as a loop of its own, latency chains and all, and the
    estimate moves with where the linker put the loop. A block that falls through into another is
    priced together with it (and with what that one falls through into): as often as it runs,
    less the runs that blocks falling through into it already carried on into it. blocks:
    {vaddr: (instructions, executions)}; returns [(lines, executions, instructions)]."""
    text = {vaddr: block_text(binary, arch, vaddr, n) for vaddr, (n, _) in blocks.items()}
    follows = {vaddr: end for vaddr, (_, end, leaves) in text.items()
               if not leaves and end in blocks and end != vaddr}
    entered = collections.Counter()  # runs of a block that came from one falling through into it
    for vaddr, end in follows.items():
        entered[end] += blocks[vaddr][1]
    bodies = []
    for vaddr, (_, count) in blocks.items():
        runs = count - entered[vaddr]
        if runs <= 0:
            continue  # every run came through a block before it, whose body includes it
        lines, n, at, seen = [], 0, vaddr, set()
        while at is not None and at not in seen:
            seen.add(at)
            lines += text[at][0]
            n += blocks[at][0]
            at = follows.get(at)
        bodies.append((lines, runs, n))
    return bodies


def block_cycles(binary, arch, cpu, lines):
    # QEMU runs an x86 rep-prefixed string instruction as one block per element: about a cycle.
    if lines and lines[0].startswith('rep '):
        return 1.0
    triple = 'aarch64' if arch == 'aarch64' else 'x86_64'
    result = subprocess.run(['llvm-mca', f'-mtriple={triple}', f'-mcpu={cpu}', '-iterations=100'],
                            input='top:\n' + '\n'.join(lines) + '\n', capture_output=True,
                            text=True)
    match = re.search(r'Total Cycles:\s+(\d+)', result.stdout)
    return int(match.group(1)) / 100 if match else None


def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    binary, first, second, apart, cpus = sys.argv[1], sys.argv[2], sys.argv[3], int(
        sys.argv[4]), sys.argv[5:]
    arch = 'aarch64' if 'aarch64' in subprocess.run(['file', '-L', binary], capture_output=True,
                                                       text=True).stdout else 'x86_64'
    start_code, before = read_profile(first)
    _, after = read_profile(second)
    segment, size = code_segment(binary)
    bias = start_code - segment  # where the file's address 0 was loaded
    runs = {block: after.get(block, 0) - before.get(block, 0) for block in set(before) | set(after)}
    total = sum(n * count for (_, n), count in runs.items() if count > 0)
    # The program's blocks (a shared library's, such as memcpy, are scaled over below) that carry
    # at least 0.01 % of the instructions; a start address translated twice with different sizes
    # is left out the same way.
    sizes = collections.Counter(vaddr for vaddr, _ in runs)
    blocks = {vaddr - bias: (n, count) for (vaddr, n), count in runs.items()
              if count > 0 and n * count >= 1e-4 * total and sizes[vaddr] == 1
              and 0 <= vaddr - start_code < size}
    covered = 0
    cycles = collections.defaultdict(float)
    for lines, count, n in sorted(loop_bodies(binary, arch, blocks), key=lambda b: -b[1] * b[2]):
        if covered > 0.97 * total:
            break
        estimates = {cpu: block_cycles(binary, arch, cpu, lines) for cpu in cpus}
        if any(value is None for value in estimates.values()):
            continue  # llvm-mca did not take the block: scaled over below
        for cpu in cpus:
            cycles[cpu] += estimates[cpu] * count
        covered += n * count
    if covered == 0:
        sys.exit('mca_estimate: no block could be modelled')
    scale = total / covered / apart
    print(f'instructions {total / apart:.4g} covered {100 * covered / total:.1f}% ' +
          ' '.join(f'{cpu} {cycles[cpu] * scale:.4g}' for cpu in cpus))


if __name__ == '__main__':
    main()
