# fish completion for backoffshim(1): install as backoffshim.fish in a
# directory fish reads (make install: PREFIX/share/fish/vendor_completions.d).

# The destinations of the shared table that status shows, for reset.
function __backoffshim_dests
    set -l cmd (commandline -opc)
    set -l which
    for i in (seq 2 (count $cmd))
        if contains -- $cmd[$i] --table --user; and test $i -lt (count $cmd)
            set which $cmd[$i] $cmd[(math $i + 1)]
        end
    end
    $cmd[1] status --json $which 2>/dev/null |
        string replace -rf '^ *\{"destination": "([^"\\\\]*)".*' '$1'
end

# How many words follow run's or schedule's "--" (none: no "--" yet).
function __backoffshim_after_dashdash
    set -l cmd (commandline -opc)
    set -l at (contains -i -- -- $cmd); or return 1
    test (math (count $cmd) - $at) -ge $argv[1]
end

set -l commands run schedule check-config status reset help
complete -c backoffshim -f
complete -c backoffshim -n "not __fish_seen_subcommand_from $commands" -l help -d 'Show help'
complete -c backoffshim -n "not __fish_seen_subcommand_from $commands" -l version -d 'Show the version'
complete -c backoffshim -n "not __fish_seen_subcommand_from $commands" -a run -d 'Run a command with its connects retried'
complete -c backoffshim -n "not __fish_seen_subcommand_from $commands" -a schedule -d 'Preview the settings and waits'
complete -c backoffshim -n "not __fish_seen_subcommand_from $commands" -a check-config -d 'Check configuration files'
complete -c backoffshim -n "not __fish_seen_subcommand_from $commands" -a status -d 'Show the shared table'
complete -c backoffshim -n "not __fish_seen_subcommand_from $commands" -a reset -d 'Clear the backoff state of a destination'
complete -c backoffshim -n "not __fish_seen_subcommand_from $commands" -a help -d 'Show the help of a command'

# run and schedule: the settings, then the command to run
set -l settings "__fish_seen_subcommand_from run schedule; and not __backoffshim_after_dashdash 0"
complete -c backoffshim -n $settings -l initial-backoff -x -d 'First wait (e.g. 250ms)'
complete -c backoffshim -n $settings -l max-backoff -x -d 'Cap on the wait'
complete -c backoffshim -n $settings -l multiplier -x -d 'Growth per failure'
complete -c backoffshim -n $settings -l jitter -x -d 'Random fraction, 0 to 1'
complete -c backoffshim -n $settings -l max-elapsed -x -d 'Time per connect call'
complete -c backoffshim -n $settings -l max-attempts -x -d 'Attempts per connect call'
complete -c backoffshim -n $settings -l policy -x -a 'grpc list exponential responsive off' -d 'How waits are computed'
complete -c backoffshim -n $settings -l config -r -F -d 'INI file to read'
complete -c backoffshim -n $settings -l pace -d 'Fail a connect inside the backoff window at once'
complete -c backoffshim -n $settings -l resolve -x -a 'off temporary wait' -d 'Retry a name that does not resolve'
complete -c backoffshim -n $settings -l log -x -a 'off error info debug' -d 'Log level'
complete -c backoffshim -n "__fish_seen_subcommand_from run" -l engine -x -a 'auto preload seccomp' -d 'The engine'
complete -c backoffshim -n "__fish_seen_subcommand_from schedule" -l dest -x -d 'The destination, ADDR:PORT'
complete -c backoffshim -n "__fish_seen_subcommand_from schedule" -s n -x -d 'How many waits to show'
complete -c backoffshim -n "__fish_seen_subcommand_from schedule" -l seed -x -d 'Seed of the random draws'
complete -c backoffshim -n "__fish_seen_subcommand_from run schedule; and __backoffshim_after_dashdash 0; and not __backoffshim_after_dashdash 1" -a '(__fish_complete_command)'
complete -c backoffshim -n "__fish_seen_subcommand_from run schedule; and __backoffshim_after_dashdash 1" -F

complete -c backoffshim -n "__fish_seen_subcommand_from check-config" -F
complete -c backoffshim -n "__fish_seen_subcommand_from check-config" -l env -d "Check the BACKOFFSHIM_* variables"

complete -c backoffshim -n "__fish_seen_subcommand_from status" -l json -d 'One JSON document'
complete -c backoffshim -n "__fish_seen_subcommand_from status" -l prometheus -d 'Prometheus text exposition'
complete -c backoffshim -n "__fish_seen_subcommand_from status" -l watch -d 'Redraw the table every SECONDS (2)'
complete -c backoffshim -n "__fish_seen_subcommand_from status" -l gc -d 'Remove tables no process has attached'
complete -c backoffshim -n "__fish_seen_subcommand_from status reset" -l table -r -F -d 'The table shared = NAME names'
complete -c backoffshim -n "__fish_seen_subcommand_from status reset" -l user -x -a '(__fish_complete_users)' -d "Another user's table"
complete -c backoffshim -n "__fish_seen_subcommand_from reset" -l all -d 'Every destination'
complete -c backoffshim -n "__fish_seen_subcommand_from reset" -a '(__backoffshim_dests)' -d 'Destination'
complete -c backoffshim -n "__fish_seen_subcommand_from run schedule check-config status reset help" -s h -l help -d 'Show help'
complete -c backoffshim -n "__fish_seen_subcommand_from help" -a "run schedule check-config status reset"
