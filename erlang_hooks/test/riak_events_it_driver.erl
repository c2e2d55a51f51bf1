%% @doc Driver for tests/integration/erlang_hooks/test_erlang_hook.py: reads one Erlang term per
%% line on stdin, runs it against the real hook and notifier, and answers one line
%% `@@ <json>' on stdout (logger output goes to stderr). Commands:
%% <ul>
%% <li>`{env, [{Key, Value}]}.' set riak_events_hook settings, reload a running notifier</li>
%% <li>`{put, Bucket, Key, Siblings}.' call riak_events_hook:postcommit/1 with a
%%     stand-in riak_object; answers the call's result and duration</li>
%% <li>`start.' start the notifier (the first put would)</li>
%% <li>`wait_idle.' wait (up to 10 s) until nothing is queued or in flight</li>
%% <li>`status.' counters and breakers</li>
%% <li>`kill_notifier.' kill the notifier process and wait for its death</li>
%% <li>`halt.'</li>
%% </ul>
-module(riak_events_it_driver).

-export([main/0]).

-spec main() -> no_return().
main() ->
    ok = logger:remove_handler(default),
    ok = logger:add_handler(default, logger_std_h, #{config => #{type => standard_error}}),
    _ = application:load(riak_events_hook),
    loop().

loop() ->
    case io:get_line("") of
        eof ->
            halt(0);
        Line ->
            {ok, Tokens, _} = erl_scan:string(Line),
            {ok, Term} = erl_parse:parse_term(Tokens),
            reply(run(Term)),
            loop()
    end.

run({env, Pairs}) ->
    [application:set_env(riak_events_hook, K, V) || {K, V} <- Pairs],
    #{reload => riak_events_notifier:reload_config()};
run({put, Bucket, Key, Siblings}) ->
    Object = riak_object:new(Bucket, Key, Siblings),
    T0 = erlang:monotonic_time(microsecond),
    Result = riak_events_hook:postcommit(Object),
    #{result => Result, micros => erlang:monotonic_time(microsecond) - T0};
run(start) ->
    %% What an operator may do after boot so that the first write does not pay for
    %% loading the modules and starting the notifier.
    {ok, _} = riak_events_notifier:start(),
    #{started => true};
run(wait_idle) ->
    #{idle => wait_idle(1000)};
run(status) ->
    Status = riak_events_notifier:status(),
    maps:without([config], Status);
run(kill_notifier) ->
    case whereis(riak_events_notifier) of
        undefined ->
            #{killed => false};
        Pid ->
            Ref = monitor(process, Pid),
            exit(Pid, kill),
            receive {'DOWN', Ref, process, Pid, _} -> #{killed => true} end
    end;
run(halt) ->
    reply(#{halted => true}),
    halt(0).

wait_idle(0) -> false;
wait_idle(N) ->
    case riak_events_notifier:idle() of
        true -> true;
        false -> timer:sleep(10), wait_idle(N - 1)
    end.

reply(Map) ->
    io:put_chars(["@@ ", json(Map), "\n"]).

%% Just enough JSON for the replies.
json(M) when is_map(M) ->
    ["{", lists:join(",", [[json(key(K)), ":", json(V)] || {K, V} <- maps:to_list(M)]), "}"];
json(L) when is_list(L) -> ["[", lists:join(",", [json(V) || V <- L]), "]"];
json(true) -> "true";
json(false) -> "false";
json(N) when is_integer(N) -> integer_to_list(N);
json(B) when is_binary(B) ->
    Escaped = binary:replace(binary:replace(B, <<"\\">>, <<"\\\\">>, [global]),
                             <<"\"">>, <<"\\\"">>, [global]),
    ["\"", Escaped, "\""];
json(A) when is_atom(A) -> ["\"", atom_to_list(A), "\""];
json(T) -> json(iolist_to_binary(io_lib:format("~0p", [T]))).

key(K) when is_atom(K) -> atom_to_binary(K, utf8);
key(K) when is_list(K) -> list_to_binary(K);
key(K) -> iolist_to_binary(io_lib:format("~0p", [K])).
