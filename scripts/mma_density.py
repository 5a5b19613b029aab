#!/usr/bin/env python3
"""Instructions per mma in the streamed-tile loop of the tensor-core attention kernels.

Reads PTX (`nvcc --ptx`; here: scripts/check_cuda.sh density) or SASS (`cuobjdump -sass`, on a GPU
machine: scripts/gpu_bench.sh's sass_density step) and prints, for each selected kernel, the
instructions of its streamed-tile loop: the loop (a backward branch and the code from its target up to
it) holding the most mma instructions, the outermost of equals. Two counts:
  path    the instructions on the shortest way from the loop's head to its back edge that issues a
          global-to-shared copy and the most mma instructions: a whole tile that streams the next one
          and skips every optional branch (the per-pair mask tests, dropout, the plain-load fallback
          for unaligned views, the skip of an idle warp, which issues no mma, and any branch that
          issues fewer); the mma column counts that path's. Back edges are
          dropped, so a loop inside the tile loop counts its body once, or not at all where it may run
          zero times (a copy loop over c = tid, tid + 128, ... does: the path then undercounts it);
  static  every instruction of the loop body once, cold paths included.
The columns ldmatrix .. other split the path by kind: ldmatrix (LDSM), ld/st.shared (LDS, STS),
cp.async (incl. commit and wait; LDGSTS, LDGDEPBAR, DEPBAR), bar (bar.sync; BAR), glob (global loads
and stores), int (integer and address arithmetic: add, mul, mad, shifts, logic, cvt, mov of integer
types; IMAD, IADD3, LEA, SHF, LOP3, ...), fp (fp32 arithmetic, exp2, conversions to bf16), ctl (setp,
selp, bra; ISETP, BRA, SHFL, ...). PTX is what ptxas compiles, not what runs (ptxas schedules, folds
address arithmetic into operands and rematerialises): on a GPU machine read the SASS counts.

    python3 scripts/mma_density.py FILE.ptx|FILE.sass [--match REGEX ...] [--markdown]
"""
import argparse
import re
import subprocess
import sys
from collections import Counter

CATEGORIES = ['mma', 'ldmatrix', 'shared', 'cp.async', 'bar', 'glob', 'int', 'fp', 'ctl', 'other']


def ptx_category(op):
    base = op.split('.')[0]
    if base == 'mma' or base == 'wgmma':
        return 'mma'
    if base == 'ldmatrix':
        return 'ldmatrix'
    if op.startswith('cp.async'):
        return 'cp.async'
    if base in ('bar', 'barrier'):
        return 'bar'
    if base in ('ld', 'st', 'red', 'atom'):
        if '.shared' in op:
            return 'shared'
        if '.param' in op:
            return 'other'
        return 'glob'
    if base in ('setp', 'selp', 'bra', 'not', 'ret', 'exit', 'shfl', 'vote') or op.endswith('.pred'):
        return 'ctl'
    if re.search(r'\.(f32|f64|f16|bf16|f16x2|bf16x2|ftz|approx|rn|rz|rm|rp)(\.|$)', op) and base != 'mov':
        return 'fp'
    if base in ('add', 'sub', 'mul', 'mad', 'shl', 'shr', 'and', 'or', 'xor', 'cvt', 'cvta', 'mov', 'min', 'max',
                'neg', 'abs', 'div', 'rem', 'bfe', 'bfi', 'prmt', 'mul24', 'mad24'):
        return 'int'
    return 'other'


SASS_CATEGORY = [
    (r'^(HMMA|IMMA|DMMA|HGMMA|BMMA)$', 'mma'),
    (r'^LDSM$', 'ldmatrix'),
    (r'^(LDS|STS|ATOMS)$', 'shared'),
    (r'^(LDGSTS|LDGDEPBAR|DEPBAR|ARRIVES)$', 'cp.async'),
    (r'^(BAR|BSYNC|WARPSYNC)$', 'bar'),
    (r'^(LDG|STG|LD|ST|RED|ATOMG|ATOM|LDC)$', 'glob'),
    (r'^(IMAD|IADD3|IADD|LEA|SHF|SHL|SHR|LOP3|LOP|MOV|SEL|IABS|IMNMX|IMUL|I2F|F2I|F2F|PRMT|BFE|BFI|FLO|POPC|'
     r'S2R|S2UR|CS2R|UMOV|UIADD3|UIMAD|ULEA|USHF|ULOP3|ULDC|R2UR|F2FP|I2FP|VIADD|VIMNMX)$', 'int'),
    (r'^(FFMA|FMUL|FADD|FMNMX|MUFU|FSEL|FSETP|FCHK|FRND|HADD2|HMUL2|HFMA2)$', 'fp'),
    (r'^(ISETP|PSETP|PLOP3|BRA|BRX|EXIT|RET|CALL|BSSY|SHFL|VOTE|P2R|R2P|NOP|YIELD|UISETP|UPLOP3|UP2R|UR2P)$', 'ctl'),
]


def sass_category(op):
    base = op.split('.')[0]
    for pattern, cat in SASS_CATEGORY:
        if re.match(pattern, base):
            return cat
    return 'other'


def parse_ptx(text):
    """{kernel: [(kind, value, opcode)]} with kind 'label' (name) or 'inst' (branch target or None)."""
    kernels, cur, name = {}, None, None
    for line in text.splitlines():
        m = re.match(r'^(\.visible\s+)?\.entry\s+(\S+?)\(', line)
        if m:
            name, cur = m.group(2), []
            kernels[name] = cur
            continue
        if cur is None:
            continue
        s = line.strip()
        if s == '}' and not line.startswith('\t'):
            cur = None
            continue
        m = re.match(r'^(\$\S+):$', s)
        if m:
            cur.append(('label', m.group(1), None, False))
            continue
        if not s or s.startswith(('.', '//', '{', '}')) or not s.endswith(';'):
            continue
        predicated = s.startswith('@')
        s = re.sub(r'^@!?%\w+\s+', '', s)
        op = s.split()[0].rstrip(';')
        target = re.search(r'\b(?:bra(?:\.uni)?)\s+(\$\S+?);', s)
        cur.append(('inst', target.group(1) if target else None, op, op.startswith(('bra', 'ret', 'exit')) and not predicated))
    return kernels, ptx_category


def parse_sass(text):
    """As parse_ptx for `cuobjdump -sass` text: labels are addresses (and .L_x_N names where printed)."""
    kernels, cur = {}, None
    for line in text.splitlines():
        m = re.match(r'^\s*Function\s*:\s*(\S+)', line)
        if m:
            cur = []
            kernels[m.group(1)] = cur
            continue
        if cur is None:
            continue
        m = re.match(r'^\s*(\.L_x_\d+):', line)
        if m:
            cur.append(('label', m.group(1), None, False))
            continue
        m = re.match(r'^\s*/\*([0-9a-f]{4,})\*/\s+(.*?);', line)
        if not m:
            continue
        cur.append(('label', '0x' + m.group(1).lstrip('0').lower() if m.group(1).strip('0') else '0x0', None, False))
        predicated = m.group(2).strip().startswith('@')
        s = re.sub(r'^@!?U?P\w+\s+', '', m.group(2).strip())
        op = s.split()[0]

        target = None
        if op.split('.')[0] == 'BRA':
            t = re.search(r'`\((\.L_x_\d+)\)|(0x[0-9a-f]+)', s)
            if t:
                target = t.group(1) or ('0x' + t.group(2)[2:].lstrip('0') if t.group(2)[2:].strip('0') else '0x0')
        cur.append(('inst', target, op, op.split('.')[0] in ('BRA', 'EXIT', 'RET') and not predicated))
    return kernels, sass_category


def loops(body):
    """(start, end) index pairs of body: a backward branch at end to a label at start."""
    seen, out = {}, []
    for i, (kind, value, _, _) in enumerate(body):
        if kind == 'label':
            seen.setdefault(value, i)
        elif value is not None and value in seen:
            out.append((seen[value], i))
    return out


def is_copy(op):
    return op.startswith(('cp.async.ca', 'cp.async.cg')) or op.split('.')[0] == 'LDGSTS'


def min_path(body, start, end, category):
    """The instructions (indices into body) on the shortest path from the loop's head (body[start]) to
    its back edge (body[end]) that issues a global-to-shared copy and the most mma instructions of any
    such path: a whole tile that streams the next one, computes, and takes no optional branch (no mask
    test, no dropout, no fallback copy, no branch with fewer products). Back edges are dropped, so an inner
    loop counts its body once (or not at all where it may run zero times). None when the loop issues no
    copy or no mma."""
    INF = ((float('inf'), float('inf')), None)
    # best[i][c]: ((-mma, instructions) from `start` to just before body[i], the fewest for the most
    # mma; predecessor state), c: 1 once a copy was issued on the way.
    best = [[INF] * 2 for _ in range(end + 2)]
    best[start][0] = ((0, 0), None)
    index = {value: i for i, (kind, value, _, _) in enumerate(body) if kind == 'label' and start <= i <= end}

    def relax(j, c, d, pred):
        if d < best[j][c][0]:
            best[j][c] = (d, pred)
    for i in range(start, end + 1):
        kind, target, op, uncond = body[i]
        for c in range(2):
            d = best[i][c][0]
            if d == INF[0]:
                continue
            if kind == 'label':
                relax(i + 1, c, d, (i, c))
                continue
            cc = c | int(is_copy(op))
            dd = (d[0] - (category(op) == 'mma'), d[1] + 1)
            if i == end:
                relax(end + 1, cc, dd, (i, c))
                continue
            if target is not None and target in index and index[target] > i:
                relax(index[target], cc, dd, (i, c))
            if not uncond:
                relax(i + 1, cc, dd, (i, c))
    if best[end + 1][1][0] == INF[0] or best[end + 1][1][0][0] == 0:
        return None
    path, state = [], best[end + 1][1][1]
    while state is not None:
        i, c = state
        if body[i][0] == 'inst':
            path.append(i)
        state = best[i][c][1]
    return path[::-1]


def analyse(body, category):
    cands = []
    for start, end in loops(body):
        mma = sum(1 for k, _, op, _ in body[start:end + 1] if k == 'inst' and category(op) == 'mma')
        cands.append((mma, end - start, start, end))
    if not cands or max(c[0] for c in cands) == 0:
        return None
    mma, _, start, end = max(cands)
    static = sum(1 for k, _, _, _ in body[start:end + 1] if k == 'inst')
    path = min_path(body, start, end, category) or []
    counts = Counter(category(body[i][2]) for i in path)
    on_path = counts.get('mma', 0) or mma
    return dict(counts, path=len(path), mma=on_path, path_per_mma=len(path) / on_path, insts=static,
                per_mma=static / mma)


def short_name(mangled):
    d = mangled
    for tool in ('c++filt', 'cu++filt'):  # binutils', or the CUDA toolkit's
        try:
            d = subprocess.run([tool, mangled], capture_output=True, text=True, check=True).stdout.strip()
            break
        except (OSError, subprocess.CalledProcessError):
            continue
    d = re.sub(r'^void ', '', d)
    d = re.sub(r'^nf::cuda::\(anonymous namespace\)::', '', d)
    d = re.sub(r'\(.*$', '', d)
    return d.replace('nf::cuda::flash::', '').replace('unsigned short', 'bf16')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('files', nargs='+', help='.ptx or cuobjdump -sass output')
    ap.add_argument('--match', action='append', default=[], help='regex on the demangled kernel name (any)')
    ap.add_argument('--markdown', action='store_true', help='a markdown table')
    args = ap.parse_args()
    rows = []
    for path in args.files:
        text = open(path).read()
        kernels, category = parse_sass(text) if 'Function :' in text or 'Function:' in text else parse_ptx(text)
        for mangled, body in kernels.items():
            name = short_name(mangled)
            if args.match and not any(re.search(m, name) for m in args.match):
                continue
            r = analyse(body, category)
            if r:
                rows.append((name, r))
    if not rows:
        sys.exit('mma_density: no kernel with an mma loop matched')
    cols = ['path', 'mma', 'path_per_mma', 'ldmatrix', 'shared', 'cp.async', 'bar', 'glob', 'int', 'fp', 'ctl', 'other',
            'insts', 'per_mma']
    head = ['kernel', 'path', 'mma', 'path/mma', 'ldmatrix', 'ld/st.shared', 'cp.async', 'bar', 'glob', 'int', 'fp',
            'ctl', 'other', 'static', 'static/mma']

    def cells(name, r):
        return [name] + [f'{r.get(c, 0):.1f}' if c.endswith('per_mma') else str(r.get(c, 0)) for c in cols]
    if args.markdown:
        print('| ' + ' | '.join(head) + ' |')
        print('| --- |' + ' ---: |' * (len(head) - 1))
        for name, r in sorted(rows):
            print('| ' + ' | '.join(cells(name, r)) + ' |')
    else:
        width = max(len(n) for n, _ in rows)
        print(f"{'kernel':<{width}} " + ' '.join(f'{h:>8}' for h in head[1:]))
        for name, r in sorted(rows):
            c = cells(name, r)
            print(f'{c[0]:<{width}} ' + ' '.join(f'{x:>8}' for x in c[1:]))


if __name__ == '__main__':
    main()
