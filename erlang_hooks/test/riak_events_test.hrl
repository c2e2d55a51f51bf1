%% Assertion macros for the tests, in the spirit of eunit.hrl, which Debian ships only
%% in erlang-dev: the tests need nothing beyond erlang-nox (erlang-eunit included).
%% Every test module exports all its functions so that eunit finds *_test/0 and
%% *_test_/0.
-compile([export_all, nowarn_export_all]).

-define(assert(Expr),
        ((fun() ->
                  case (Expr) of
                      true -> ok;
                      __V -> erlang:error({assert, [{module, ?MODULE}, {line, ?LINE},
                                                    {expression, (??Expr)},
                                                    {value, __V}]})
                  end
          end)())).

-define(assertEqual(Expect, Expr),
        ((fun() ->
                  __X = (Expect),
                  __V = (Expr),
                  case __V =:= __X of
                      true -> ok;
                      false -> erlang:error({assertEqual, [{module, ?MODULE}, {line, ?LINE},
                                                           {expression, (??Expr)},
                                                           {expected, __X}, {value, __V}]})
                  end
          end)())).

-define(assertMatch(Pattern, Expr),
        ((fun() ->
                  case (Expr) of
                      Pattern -> ok;
                      __V -> erlang:error({assertMatch, [{module, ?MODULE}, {line, ?LINE},
                                                         {expression, (??Expr)},
                                                         {pattern, (??Pattern)},
                                                         {value, __V}]})
                  end
          end)())).

-define(_test(Expr), {?LINE, fun() -> (Expr) end}).
-define(_assert(Expr), ?_test(?assert(Expr))).
-define(_assertEqual(Expect, Expr), ?_test(?assertEqual(Expect, Expr))).
-define(_assertMatch(Pattern, Expr), ?_test(?assertMatch(Pattern, Expr))).

-define(assertNotEqual(Unexpected, Expr),
        ((fun() ->
                  __X = (Unexpected),
                  __V = (Expr),
                  case __V =/= __X of
                      true -> ok;
                      false -> erlang:error({assertNotEqual, [{module, ?MODULE},
                                                              {line, ?LINE},
                                                              {expression, (??Expr)},
                                                              {value, __V}]})
                  end
          end)())).
