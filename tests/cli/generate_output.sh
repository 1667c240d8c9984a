#!/usr/bin/env bash
# What generate prints, checked against the library: every --json key with its type and the
# values' agreement (check_generate_output), --dump-logits row by row against the library's logits
# of the same step, replies that stop at an EOS id, at the reply length and at a full context; and
# the interactive chat past a full context: it says how full the context is after each turn,
# refuses a message that no longer fits without exiting, and /reset gives a fresh conversation
# (the same reply as the first turn's, token for token).
# Usage: generate_output.sh <generate> <make_model> <check_generate_output> <work dir>
set -u
generate=$1
make_model=$2
check=$3

source "$(dirname "$0")/common.sh"
start_cli_test "$4"
make_tiny_models "$make_model" q8_0
hf=$work/hf
# The checker recomputes the logits with the portable kernels and an F32 cache: generate uses the
# same (--backend cpu:portable), so that the rows agree to float noise.

# check_run <name> <stop> <prompt ids> <generate args...>: generate --json --dump-logits, then the
# checker on its output.
check_run() {
  local name=$1 stop=$2 ids=$3
  shift 3
  if "$generate" -m "$hf" --backend cpu:portable --prompt-ids "$ids" --greedy --kv-type f32 -q --json \
      --dump-logits "$work/$name.npy" "$@" > "$work/$name.json" 2> "$work/err.txt" &&
    "$check" "$work/$name.json" "$hf" "$ids" "$work/$name.npy" "$stop" > "$work/check.txt"; then
    ok "$name: $(tr '\n' ' ' < "$work/check.txt")"
  else
    cat "$work/check.txt" 2> /dev/null; fail "$name"
  fi
}
# 49,0 is answered by 127 and then the EOS id 313 (generate_flags uses the same prompt).
check_run "stop at eos" eos 49,0 -n 12
check_run "stop at the length" length 1,2,3 -n 6 --ignore-eos
check_run "stop at a full context" context_full 1,2,3 -n 20 -c 9 --ignore-eos
check_run "stop at a full cache" context_full 5,6,7,8 -n 20 --kv-capacity 7 -c 40 --ignore-eos
# With eviction and a text prompt (the text key, kv_budget).
if "$generate" -m "$hf" --backend cpu:portable -p "Hello there" -n 16 --greedy --ignore-eos --kv-type f32 -q --json \
    --eviction-policy sliding --kv-budget 8 --eviction-window 6 > "$work/evict.json" 2> "$work/err.txt" &&
  "$check" "$work/evict.json" "$hf" - - \
    > "$work/check.txt" 2>&1; then
  ok "eviction and text: $(tr '\n' ' ' < "$work/check.txt")"
else
  cat "$work/check.txt" 2> /dev/null; fail "eviction and text"
fi

# The checker itself catches a dump of another step and a key it does not know.
"$generate" -m "$hf" --backend cpu:portable --prompt-ids 1,2,3 --greedy --kv-type f32 -q --json -n 4 --ignore-eos \
  --dump-logits "$work/other.npy" > "$work/other.json" 2> "$work/err.txt"
if ! "$check" "$work/other.json" "$hf" 1,2,4 "$work/other.npy" length > "$work/check.txt"; then
  ok "checker: logits of another prompt are caught"
else
  fail "checker: logits of another prompt pass"
fi
sed 's/"stop":/"surprise":1,"stop":/' "$work/other.json" > "$work/extra.json"
if ! "$check" "$work/extra.json" "$hf" 1,2,3 - > "$work/check.txt" &&
  grep -q "unknown key 'surprise'" "$work/check.txt"; then
  ok "checker: an unknown key is caught"
else
  fail "checker: an unknown key passes"
fi

# A tokenizer that can produce an id the model has no embedding row for is refused at load, naming
# the tokenizer's file and field, before any prompt reaches that id.
cp -r "$hf" "$work/wide"
sed -i 's/"added_tokens": *\[/&{"id": 400, "content": "<|wide|>", "special": true},/' \
  "$work/wide/tokenizer.json"
expect_error_from "$generate" generate "tokenizer past the model's vocabulary" \
  "$work/wide/tokenizer.json: added_tokens[0].id: id 400 is outside the model's vocabulary of 320" \
  -m "$work/wide" -p "Hi" -n 2

# --- The interactive chat past a full context.
# repl <name> <generate args...>: a chat fed the lines of $work/<name>.in; stdout (one line of ids
# per reply, --print-ids) in $work/<name>.out, stderr in $work/<name>.err, the exit code in $rc.
repl() {
  local name=$1
  shift
  timeout 120 "$generate" -m "$hf" --backend cpu:portable -i --chat-template llama3 --greedy \
    --print-ids "$@" \
    < "$work/$name.in" > "$work/$name.out" 2> "$work/$name.err"
  rc=$?
}
{ for _ in $(seq 1 12); do echo "Tell me a story"; done; echo "/reset"; echo "Tell me a story"; } \
  > "$work/full.in"
repl full -n 8 -c 160 --ignore-eos
refused=$(grep -c "(the message needs [0-9]* positions and the context has [0-9]* of 160 left: /reset starts a new conversation" "$work/full.err")
turns=$(grep -c '\[8 tokens, [a-z_]*; context [0-9]* of 160 positions used ([0-9]*%)' "$work/full.err")
if [ "$rc" -eq 0 ] && [ "$refused" -ge 1 ] && [ "$turns" -ge 3 ] &&
  [ "$((refused + turns))" -ge 13 ] && grep -q "conversation cleared" "$work/full.err"; then
  ok "a chat past -c 160: exit 0, $turns turns and $refused refusals with the context's use"
else
  echo "exit code $rc, $turns turns, $refused refusals"; cat "$work/full.err"; fail "a chat past -c 160"
fi
# The turn after /reset replies as the first turn did, token for token (one stdout line per turn
# that ran: a refused turn after a /reset that left the cache full would print none), while the
# last reply before it, the same message in a longer context, differs: so the equality shows that
# the context was cleared, and a /reset that kept the cache would fail here.
first=$(head -n 1 "$work/full.out")
before=$(tail -n 2 "$work/full.out" | head -n 1)
after=$(tail -n 1 "$work/full.out")
if [ "$(wc -l < "$work/full.out")" -eq "$turns" ] && [ "$first" = "$after" ] &&
  [ "$before" != "$first" ]; then
  ok "/reset: the next reply is the first turn's ($first), the one before it was not ($before)"
else
  cat "$work/full.out"; fail "/reset: the next reply is not the first turn's, or the one before it was too"
fi
# Without /reset, the turns after the refusal are refused too, and the chat still ends cleanly.
printf 'Hi\nHi\nHi\nHi\nHi\nHi\nHi\nHi\nHi\nHi\n/quit\n' > "$work/quit.in"
repl quit -n 8 -c 40 --ignore-eos
if [ "$rc" -eq 0 ] && grep -q "(the message needs" "$work/quit.err"; then
  ok "a chat that stays full ends with /quit, exit 0"
else
  echo "exit code $rc"; cat "$work/quit.err"; fail "a chat that stays full"
fi
# With an eviction policy the cache's capacity does not end the chat: more turns fit than the
# cache holds, and the line shows the cache's slots beside the context.
{ for _ in $(seq 1 12); do echo "Tell me a story"; done; } > "$work/evict.in"
repl evict -n 8 -c 160 --ignore-eos --eviction-policy sink --sink-tokens 4 --eviction-window 16
if [ "$rc" -eq 0 ] && grep -q '; cache [0-9]* of [0-9]* slots\]' "$work/evict.err" &&
  grep -q "context 1[0-9][0-9] of 160 positions used" "$work/evict.err"; then
  ok "a chat with eviction runs past the cache"
else
  echo "exit code $rc"; cat "$work/evict.err"; fail "a chat with eviction runs past the cache"
fi

finish_cli_test generate_output
