#!/usr/bin/env escript
%% merge-advanced-config.escript STOCK OURS OUT: Riak's advanced.config with the
%% riak-events stanza merged in (deploy/riak/advanced.config), as the install guide asks
%% by hand: every application section of the stock file is kept; for each application
%% in ours, its keys are added to (or replace the same keys in) the stock section.
main([Stock, Ours, Out]) ->
    StockTerms = case filelib:is_regular(Stock) of
        true -> {ok, [S]} = file:consult(Stock), S;
        false -> []
    end,
    {ok, [OurTerms]} = file:consult(Ours),
    Merged = lists:foldl(
        fun({App, Env}, Acc) ->
            Old = proplists:get_value(App, Acc, []),
            New = lists:foldl(fun(KV, E) -> lists:keystore(element(1, KV), 1, E, KV) end,
                              Old, Env),
            lists:keystore(App, 1, Acc, {App, New})
        end,
        StockTerms, OurTerms),
    ok = file:write_file(Out, io_lib:format("%% Riak's advanced.config with riak-events' merged in.~n~p.~n", [Merged]));
main(_) ->
    io:format(standard_error, "usage: merge-advanced-config.escript STOCK OURS OUT~n", []),
    halt(2).
