# Completes a command line in a real interactive zsh (zpty) with avoctl's
# completion script loaded through compinit, and prints the line as the
# editor left it after one TAB (terminal escapes removed, trailing blanks
# kept off).
#   zsh -f tests/integration/zsh_complete.zsh FPATH_DIR 'avoctl wat'
zmodload zsh/zpty || exit 2
zpty z env PATH="$PATH" TERM=xterm HOME="$1" zsh -f -i
zpty -w z "fpath=($1 \$fpath); autoload -Uz compinit; compinit -u -D; PROMPT='%% '; unsetopt beep"
zpty -w -n z "$2"$'\t'
local all="" chunk
integer i
# Up to 3 s for compinit and the completion to draw the line.
for (( i = 0; i < 30; i++ )); do
    sleep 0.1
    while zpty -r -t z chunk; do all+=$chunk; done
done
zpty -d z
# The last redraw of the line after the prompt, without terminal escapes
# or the editor's backspaces.
setopt extendedglob
local line=${all##*\% }
line=${line//$'\e'\[[0-9\;\?]#[a-zA-Z]/}
line=${line//$'\e'[=>]/}
line=${line//?$'\b'/}
line=${line//$'\r'/}
print -r -- "${line%% #}"
