"""User-facing strings in English, Hindi, Gujarati and Telugu, and ``t()`` to look them up.

Strings are plain text with ``str.format`` placeholders; callers escape them for HTML (values
such as scores are formatted by the caller, e.g. ``score="0.779"``; a score beside a floor by
``rag.numbers.side_by_side``, so ``{score}`` and ``{floor}`` never read as the same number when
they are not: "0.8496 ... 0.850"). Every key exists in English;
other languages fall back to English key by key.
"""

from __future__ import annotations

DEFAULT_LANG = "en"

MESSAGES: dict[str, dict[str, str]] = {
    "help": {
        "en": "Hello! Ask me a question by voice or text in English, Hindi, Gujarati or Telugu. "
              "I answer only from my sources and say so when I cannot. A short follow-up such "
              "as \"and a big one?\" is read together with your previous question.\n"
              "/lang – answer language, /mode – answer style, /voice – spoken answers, /why – how "
              "I decided the last answer, /new – start afresh.",
        "hi": "नमस्ते! मुझसे अंग्रेज़ी, हिंदी, गुजराती या तेलुगु में बोलकर या लिखकर सवाल पूछें। "
              "मैं केवल अपने स्रोतों से जवाब देता हूँ, और जवाब न मिले तो साफ़ बता देता हूँ। "
              "\"और बड़े वाले में?\" जैसा छोटा सवाल आपके पिछले सवाल के साथ पढ़ा जाता है।\n"
              "/lang – जवाब की भाषा, /mode – जवाब का तरीका, /voice – बोलकर जवाब, "
              "/why – पिछला जवाब कैसे तय हुआ, /new – नई शुरुआत।",
        "gu": "નમસ્તે! મને અંગ્રેજી, હિન્દી, ગુજરાતી કે તેલુગુમાં બોલીને અથવા લખીને પ્રશ્ન પૂછો. "
              "હું ફક્ત મારા સ્રોતોમાંથી જવાબ આપું છું, અને જવાબ ન મળે તો સ્પષ્ટ કહું છું. "
              "\"અને મોટામાં?\" જેવો ટૂંકો પ્રશ્ન તમારા અગાઉના પ્રશ્ન સાથે વંચાય છે.\n"
              "/lang – જવાબની ભાષા, /mode – જવાબની રીત, /voice – બોલીને જવાબ, "
              "/why – છેલ્લો જવાબ કેવી રીતે નક્કી થયો, /new – નવી શરૂઆત.",
        "te": "నమస్తే! ఇంగ్లీష్, హిందీ, గుజరాతీ లేదా తెలుగులో మాట్లాడి లేదా రాసి ప్రశ్న అడగండి. "
              "నేను నా మూలాల నుండి మాత్రమే సమాధానం ఇస్తాను; దొరకకపోతే స్పష్టంగా చెబుతాను. "
              "\"మరి పెద్దదానిలో?\" వంటి చిన్న ప్రశ్న మీ మునుపటి ప్రశ్నతో కలిపి చదవబడుతుంది.\n"
              "/lang – సమాధాన భాష, /mode – సమాధాన విధానం, /voice – మాటల సమాధానం, "
              "/why – చివరి సమాధానం ఎలా నిర్ణయించబడింది, /new – కొత్తగా మొదలు.",
    },
    # ---- refusals (render states the numbers: 3 decimals, more where score and floor
    # would otherwise read the same, rag.numbers.side_by_side)
    "refused_no_match": {
        "en": "I could not find this in my sources: best match {score} is below the floor "
              "{floor}.",
        "hi": "यह मुझे अपने स्रोतों में नहीं मिला: सबसे अच्छा मिलान {score} है, जो न्यूनतम सीमा "
              "{floor} से कम है।",
        "gu": "આ મને મારા સ્રોતોમાં મળ્યું નહીં: શ્રેષ્ઠ મેળ {score} છે, જે લઘુત્તમ મર્યાદા "
              "{floor} કરતાં ઓછો છે.",
        "te": "ఇది నా మూలాల్లో దొరకలేదు: ఉత్తమ సరిపోలిక {score}, ఇది కనీస పరిమితి "
              "{floor} కంటే తక్కువ.",
    },
    "refused_no_passages": {
        "en": "I could not find this in my sources: no passage matched (floor {floor}).",
        "hi": "यह मुझे अपने स्रोतों में नहीं मिला: कोई अंश मेल नहीं खाया (न्यूनतम सीमा {floor})।",
        "gu": "આ મને મારા સ્રોતોમાં મળ્યું નહીં: કોઈ ફકરો મેળ ખાતો નથી (લઘુત્તમ મર્યાદા {floor}).",
        "te": "ఇది నా మూలాల్లో దొరకలేదు: ఏ భాగమూ సరిపోలలేదు (కనీస పరిమితి {floor}).",
    },
    "refused_unanswerable_scored": {
        "en": "My sources have a related passage (score {score}, above the floor {floor}), but "
              "it does not actually answer this question.",
        "hi": "मेरे स्रोतों में एक मिलता-जुलता अंश है (स्कोर {score}, न्यूनतम सीमा {floor} से "
              "ऊपर), पर वह असल में इस सवाल का जवाब नहीं देता।",
        "gu": "મારા સ્રોતોમાં એક મળતો આવતો ફકરો છે (સ્કોર {score}, લઘુત્તમ મર્યાદા {floor} થી "
              "ઉપર), પણ તે ખરેખર આ પ્રશ્નનો જવાબ આપતો નથી.",
        "te": "నా మూలాల్లో సంబంధిత భాగం ఉంది (స్కోర్ {score}, కనీస పరిమితి {floor} కంటే "
              "ఎక్కువ), కానీ అది నిజంగా ఈ ప్రశ్నకు సమాధానం ఇవ్వదు.",
    },
    "refused_no_shared_words": {
        "en": "My sources have a passage close to this question (score {score}, above the floor "
              "{floor}), but it shares no word with the question, so I will not answer from it.",
        "hi": "मेरे स्रोतों में इस सवाल से मिलता-जुलता एक अंश है (स्कोर {score}, न्यूनतम सीमा "
              "{floor} से ऊपर), पर उसमें सवाल का कोई शब्द नहीं है, इसलिए मैं उससे जवाब नहीं "
              "दूँगा।",
        "gu": "મારા સ્રોતોમાં આ પ્રશ્નને મળતો એક ફકરો છે (સ્કોર {score}, લઘુત્તમ મર્યાદા {floor} "
              "થી ઉપર), પણ તેમાં પ્રશ્નનો કોઈ શબ્દ નથી, તેથી હું તેના પરથી જવાબ નહીં આપું.",
        "te": "నా మూలాల్లో ఈ ప్రశ్నకు దగ్గరగా ఉన్న ఒక భాగం ఉంది (స్కోర్ {score}, కనీస పరిమితి "
              "{floor} కంటే ఎక్కువ), కానీ అందులో ప్రశ్నలోని ఏ పదమూ లేదు, కాబట్టి దాని నుండి "
              "సమాధానం ఇవ్వను.",
    },
    "refused_unanswerable": {
        "en": "My sources do not answer this question.",
        "hi": "मेरे स्रोतों में इस सवाल का जवाब नहीं है।",
        "gu": "મારા સ્રોતોમાં આ પ્રશ્નનો જવાબ નથી.",
        "te": "నా మూలాల్లో ఈ ప్రశ్నకు సమాధానం లేదు.",
    },
    "refused_ungrounded": {
        "en": "I found related passages but could not form an answer they support, so I will "
              "not guess.",
        "hi": "मुझे संबंधित अंश मिले, पर उनसे समर्थित जवाब नहीं बन सका, इसलिए मैं अनुमान नहीं "
              "लगाऊँगा।",
        "gu": "મને સંબંધિત ફકરા મળ્યા, પણ તેમના આધારે જવાબ બની શક્યો નહીં, તેથી હું અનુમાન "
              "નહીં કરું.",
        "te": "సంబంధిత భాగాలు దొరికాయి, కానీ వాటి ఆధారంగా సమాధానం రూపొందించలేకపోయాను, "
              "కాబట్టి ఊహించి చెప్పను.",
    },
    "score_line": {
        "en": "Best match {score}, floor {floor}.",
        "hi": "सबसे अच्छा मिलान {score}, न्यूनतम सीमा {floor}।",
        "gu": "શ્રેષ્ઠ મેળ {score}, લઘુત્તમ મર્યાદા {floor}.",
        "te": "ఉత్తమ సరిపోలిక {score}, కనీస పరిమితి {floor}.",
    },
    # ---- bad input (reasons of rag.guards.check_input)
    "bad_input": {
        "en": "I cannot use this as a question. Please rephrase it.",
        "hi": "मैं इसे सवाल के रूप में नहीं ले सकता। कृपया इसे दूसरे शब्दों में पूछें।",
        "gu": "હું આને પ્રશ્ન તરીકે લઈ શકતો નથી. કૃપા કરીને તેને બીજા શબ્દોમાં પૂછો.",
        "te": "దీన్ని ప్రశ్నగా తీసుకోలేను. దయచేసి మరోలా అడగండి.",
    },
    "bad_input_empty": {
        "en": "Your message is empty. Please ask a question.",
        "hi": "आपका संदेश खाली है। कृपया कोई सवाल पूछें।",
        "gu": "તમારો સંદેશ ખાલી છે. કૃપા કરીને પ્રશ્ન પૂછો.",
        "te": "మీ సందేశం ఖాళీగా ఉంది. దయచేసి ఒక ప్రశ్న అడగండి.",
    },
    "bad_input_too_short": {
        "en": "Your question is too short. Please ask in a few words.",
        "hi": "आपका सवाल बहुत छोटा है। कृपया कुछ शब्दों में पूछें।",
        "gu": "તમારો પ્રશ્ન બહુ ટૂંકો છે. કૃપા કરીને થોડા શબ્દોમાં પૂછો.",
        "te": "మీ ప్రశ్న చాలా చిన్నది. దయచేసి కొన్ని పదాల్లో అడగండి.",
    },
    "bad_input_too_long": {
        "en": "Your question is too long: please keep it under {max_chars} characters.",
        "hi": "आपका सवाल बहुत लंबा है: कृपया इसे {max_chars} अक्षरों से छोटा रखें।",
        "gu": "તમારો પ્રશ્ન બહુ લાંબો છે: કૃપા કરીને તેને {max_chars} અક્ષરોથી ટૂંકો રાખો.",
        "te": "మీ ప్రశ్న చాలా పొడవుగా ఉంది: దయచేసి {max_chars} అక్షరాల లోపు ఉంచండి.",
    },
    # a question over rag.settings.RagSettings.max_query_chars, cut by the input guard
    "question_cut": {
        "en": "Your question was {n_chars} characters long, over the limit of {max_chars}: I "
              "read only its first {n_kept} characters.",
        "hi": "आपका सवाल {n_chars} अक्षरों का था, जो {max_chars} की सीमा से ज़्यादा है: मैंने "
              "केवल इसके पहले {n_kept} अक्षर पढ़े।",
        "gu": "તમારો પ્રશ્ન {n_chars} અક્ષરોનો હતો, જે {max_chars} ની મર્યાદાથી વધુ છે: મેં "
              "ફક્ત તેના પહેલા {n_kept} અક્ષરો વાંચ્યા.",
        "te": "మీ ప్రశ్న {n_chars} అక్షరాలు, ఇది {max_chars} పరిమితి కంటే ఎక్కువ: నేను దానిలో "
              "మొదటి {n_kept} అక్షరాలు మాత్రమే చదివాను.",
    },
    "bad_input_garbled": {
        "en": "I could not make sense of that. Please rephrase your question.",
        "hi": "मैं इसे समझ नहीं पाया। कृपया अपना सवाल दूसरे शब्दों में पूछें।",
        "gu": "હું આ સમજી શક્યો નહીં. કૃપા કરીને તમારો પ્રશ્ન બીજા શબ્દોમાં પૂછો.",
        "te": "నాకు అది అర్థం కాలేదు. దయచేసి మీ ప్రశ్నను మరోలా అడగండి.",
    },
    "bad_input_unsupported_language": {
        "en": "I understand only English, Hindi, Gujarati and Telugu.",
        "hi": "मैं केवल अंग्रेज़ी, हिंदी, गुजराती और तेलुगु समझता हूँ।",
        "gu": "હું ફક્ત અંગ્રેજી, હિન્દી, ગુજરાતી અને તેલુગુ સમજું છું.",
        "te": "నాకు ఇంగ్లీష్, హిందీ, గుజరాతీ, తెలుగు మాత్రమే అర్థమవుతాయి.",
    },
    # ---- voice and speech-to-text
    "voice_too_big": {
        "en": "This voice note is too large: the limit is {max_mb} MB.",
        "hi": "यह वॉइस नोट बहुत बड़ा है: सीमा {max_mb} MB है।",
        "gu": "આ વૉઇસ નોટ બહુ મોટી છે: મર્યાદા {max_mb} MB છે.",
        "te": "ఈ వాయిస్ నోట్ చాలా పెద్దది: పరిమితి {max_mb} MB.",
    },
    "voice_too_long": {
        "en": "This voice note is too long: please keep it under {max_s} seconds.",
        "hi": "यह वॉइस नोट बहुत लंबा है: कृपया इसे {max_s} सेकंड से छोटा रखें।",
        "gu": "આ વૉઇસ નોટ બહુ લાંબી છે: કૃપા કરીને તેને {max_s} સેકંડથી ટૂંકી રાખો.",
        "te": "ఈ వాయిస్ నోట్ చాలా పొడవుగా ఉంది: దయచేసి {max_s} సెకన్ల లోపు ఉంచండి.",
    },
    "voice_download_failed": {
        "en": "I could not download this voice note. Please send it again.",
        "hi": "मैं यह वॉइस नोट डाउनलोड नहीं कर पाया। कृपया इसे फिर से भेजें।",
        "gu": "હું આ વૉઇસ નોટ ડાઉનલોડ કરી શક્યો નહીં. કૃપા કરીને તેને ફરીથી મોકલો.",
        "te": "ఈ వాయిస్ నోట్‌ను డౌన్‌లోడ్ చేయలేకపోయాను. దయచేసి దాన్ని మళ్లీ పంపండి.",
    },
    "audio_unreadable": {
        "en": "I could not read this audio. Please record the voice note again.",
        "hi": "मैं यह ऑडियो पढ़ नहीं पाया। कृपया वॉइस नोट फिर से रिकॉर्ड करें।",
        "gu": "હું આ ઑડિયો વાંચી શક્યો નહીં. કૃપા કરીને વૉઇસ નોટ ફરીથી રેકોર્ડ કરો.",
        "te": "ఈ ఆడియోను చదవలేకపోయాను. దయచేసి వాయిస్ నోట్‌ను మళ్లీ రికార్డ్ చేయండి.",
    },
    "no_speech": {
        "en": "I could not hear any speech in this voice note.",
        "hi": "इस वॉइस नोट में मुझे कोई बोली सुनाई नहीं दी।",
        "gu": "આ વૉઇસ નોટમાં મને કોઈ બોલાયેલું સંભળાયું નહીં.",
        "te": "ఈ వాయిస్ నోట్‌లో నాకు మాటలు ఏవీ వినిపించలేదు.",
    },
    # device-neutral: the note may come from a phone, a laptop's microphone or a headset
    "no_question_heard": {
        "en": "I could not hear a question in this voice note. Please speak closer to the "
              "microphone and ask again.",
        "hi": "इस वॉइस नोट में मुझे कोई सवाल सुनाई नहीं दिया। कृपया माइक्रोफ़ोन के पास बोलकर दोबारा "
              "पूछें।",
        "gu": "આ વૉઇસ નોટમાં મને કોઈ પ્રશ્ન સંભળાયો નહીં. કૃપા કરીને માઇક્રોફોનની નજીક બોલીને ફરી "
              "પૂછો.",
        "te": "ఈ వాయిస్ నోట్‌లో నాకు ప్రశ్న ఏదీ వినిపించలేదు. దయచేసి మైక్రోఫోన్‌కు దగ్గరగా మాట్లాడి "
              "మళ్లీ అడగండి.",
    },
    "stt_down": {
        "en": "The speech service is not available right now. Please try again later or type "
              "your question.",
        "hi": "आवाज़ पहचानने की सेवा अभी उपलब्ध नहीं है। कृपया बाद में प्रयास करें या सवाल लिखकर "
              "भेजें।",
        "gu": "અવાજ ઓળખવાની સેવા હમણાં ઉપલબ્ધ નથી. કૃપા કરીને પછી પ્રયાસ કરો અથવા પ્રશ્ન લખીને "
              "મોકલો.",
        "te": "మాటను గుర్తించే సేవ ప్రస్తుతం అందుబాటులో లేదు. దయచేసి తర్వాత ప్రయత్నించండి లేదా "
              "ప్రశ్నను టైప్ చేయండి.",
    },
    "stt_slow": {
        "en": "The speech service is too slow right now. Please try again or type your question.",
        "hi": "आवाज़ पहचानने की सेवा अभी बहुत धीमी है। कृपया फिर से प्रयास करें या सवाल लिखकर "
              "भेजें।",
        "gu": "અવાજ ઓળખવાની સેવા હમણાં બહુ ધીમી છે. કૃપા કરીને ફરી પ્રયાસ કરો અથવા પ્રશ્ન લખીને "
              "મોકલો.",
        "te": "మాటను గుర్తించే సేవ ప్రస్తుతం చాలా నెమ్మదిగా ఉంది. దయచేసి మళ్లీ ప్రయత్నించండి లేదా "
              "ప్రశ్నను టైప్ చేయండి.",
    },
    # ---- limits and failures
    "rate_limited": {
        "en": "Too many messages: please wait {seconds} s.",
        "hi": "बहुत सारे संदेश: कृपया {seconds} सेकंड रुकें।",
        "gu": "ઘણા બધા સંદેશા: કૃપા કરીને {seconds} સેકંડ રાહ જુઓ.",
        "te": "చాలా సందేశాలు వచ్చాయి: దయచేసి {seconds} సెకన్లు ఆగండి.",
    },
    "stale_question": {
        "en": "Sorry, this question reached me too late to answer (I was restarting). "
              "Please ask it again.",
        "hi": "माफ़ कीजिए, यह सवाल मुझ तक बहुत देर से पहुँचा (मैं फिर से शुरू हो रहा था)। "
              "कृपया इसे दोबारा पूछें।",
        "gu": "માફ કરશો, આ પ્રશ્ન મારા સુધી બહુ મોડો પહોંચ્યો (હું ફરી શરૂ થઈ રહ્યો હતો). "
              "કૃપા કરીને ફરીથી પૂછો.",
        "te": "క్షమించండి, ఈ ప్రశ్న నాకు చాలా ఆలస్యంగా చేరింది (నేను మళ్లీ ప్రారంభమవుతున్నాను). "
              "దయచేసి మళ్లీ అడగండి.",
    },
    "error": {
        "en": "Something went wrong on my side. Please try again.",
        "hi": "मेरी ओर से कुछ गड़बड़ हो गई। कृपया फिर से प्रयास करें।",
        "gu": "મારી બાજુએ કંઈક ખોટું થયું. કૃપા કરીને ફરી પ્રયાસ કરો.",
        "te": "నా వైపు ఏదో పొరపాటు జరిగింది. దయచేసి మళ్లీ ప్రయత్నించండి.",
    },
    "not_allowed": {
        "en": "Sorry, this bot is private.",
        "hi": "क्षमा करें, यह बॉट निजी है।",
        "gu": "માફ કરશો, આ બોટ ખાનગી છે.",
        "te": "క్షమించండి, ఈ బాట్ ప్రైవేట్.",
    },
    # ---- messages the bot does not take as questions
    "unknown_command": {
        "en": "Unknown command {command}. I understand text questions and voice notes; /help "
              "lists the commands.",
        "hi": "अज्ञात कमांड {command}। मैं लिखे हुए सवाल और वॉइस नोट समझता हूँ; कमांड की सूची के "
              "लिए /help भेजें।",
        "gu": "અજાણ્યો કમાન્ડ {command}. હું લખેલા પ્રશ્નો અને વૉઇસ નોટ સમજું છું; કમાન્ડની યાદી "
              "માટે /help મોકલો.",
        "te": "తెలియని కమాండ్ {command}. నేను టైప్ చేసిన ప్రశ్నలు, వాయిస్ నోట్‌లు అర్థం "
              "చేసుకుంటాను; కమాండ్‌ల జాబితా కోసం /help పంపండి.",
    },
    "unsupported_message": {
        "en": "I understand text questions and voice notes; /help says more.",
        "hi": "मैं लिखे हुए सवाल और वॉइस नोट समझता हूँ; ज़्यादा जानकारी के लिए /help भेजें।",
        "gu": "હું લખેલા પ્રશ્નો અને વૉઇસ નોટ સમજું છું; વધુ માહિતી માટે /help મોકલો.",
        "te": "నేను టైప్ చేసిన ప్రశ్నలు, వాయిస్ నోట్‌లు అర్థం చేసుకుంటాను; మరిన్ని వివరాలకు "
              "/help పంపండి.",
    },
    "no_audio_file": {
        "en": "No audio file at {path}: it does not exist, cannot be read, or is a folder or a "
              "device. Give the path of an audio file such as .ogg, .wav or .mp3.",
        "hi": "{path} पर कोई ऑडियो फ़ाइल नहीं है: वह मौजूद नहीं है, पढ़ी नहीं जा सकती, या फ़ोल्डर या "
              "डिवाइस है। .ogg, .wav या .mp3 जैसी किसी ऑडियो फ़ाइल का पाथ दें।",
        "gu": "{path} પર કોઈ ઑડિયો ફાઇલ નથી: તે અસ્તિત્વમાં નથી, વાંચી શકાતી નથી, અથવા ફોલ્ડર કે "
              "ડિવાઇસ છે. .ogg, .wav કે .mp3 જેવી ઑડિયો ફાઇલનો પાથ આપો.",
        "te": "{path} వద్ద ఆడియో ఫైల్ లేదు: అది లేదు, చదవలేము, లేదా అది ఫోల్డర్ లేదా డివైస్. "
              ".ogg, .wav లేదా .mp3 వంటి ఆడియో ఫైల్ పాత్ ఇవ్వండి.",
    },
    # ---- command descriptions (set_my_commands; at most 256 characters each)
    "cmd_start": {
        "en": "Start and see what I can do",
        "hi": "शुरू करें और जानें मैं क्या कर सकता हूँ",
        "gu": "શરૂ કરો અને જાણો હું શું કરી શકું છું",
        "te": "ప్రారంభించి నేను ఏమి చేయగలనో చూడండి",
    },
    "cmd_help": {
        "en": "How to ask questions",
        "hi": "सवाल कैसे पूछें",
        "gu": "પ્રશ્ન કેવી રીતે પૂછવો",
        "te": "ప్రశ్నలు ఎలా అడగాలి",
    },
    "cmd_why": {
        "en": "How the last answer was decided",
        "hi": "पिछला जवाब कैसे तय हुआ",
        "gu": "છેલ્લો જવાબ કેવી રીતે નક્કી થયો",
        "te": "చివరి సమాధానం ఎలా నిర్ణయించబడింది",
    },
    "cmd_new": {
        "en": "Start afresh: forget the previous question",
        "hi": "नई शुरुआत: पिछला सवाल भूल जाएँ",
        "gu": "નવી શરૂઆત: અગાઉનો પ્રશ્ન ભૂલી જાઓ",
        "te": "కొత్తగా మొదలు: మునుపటి ప్రశ్నను మర్చిపోండి",
    },
    "cmd_lang": {
        "en": "Answer language: en, hi, gu, te or auto",
        "hi": "जवाब की भाषा: en, hi, gu, te या auto",
        "gu": "જવાબની ભાષા: en, hi, gu, te અથવા auto",
        "te": "సమాధాన భాష: en, hi, gu, te లేదా auto",
    },
    "cmd_mode": {
        "en": "Answer style: extractive or generative",
        "hi": "जवाब का तरीका: extractive या generative",
        "gu": "જવાબની રીત: extractive અથવા generative",
        "te": "సమాధాన విధానం: extractive లేదా generative",
    },
    "cmd_voice": {
        "en": "Spoken replies: on, off or auto",
        "hi": "बोलकर जवाब: on, off या auto",
        "gu": "બોલીને જવાબ: on, off અથવા auto",
        "te": "మాటల సమాధానం: on, off లేదా auto",
    },
    # ---- answer labels
    "low_confidence": {
        "en": "Low confidence: best match {score} is close to the floor {floor}.",
        "hi": "कम भरोसा: सबसे अच्छा मिलान {score} न्यूनतम सीमा {floor} के करीब है।",
        "gu": "ઓછો વિશ્વાસ: શ્રેષ્ઠ મેળ {score} લઘુત્તમ મર્યાદા {floor} ની નજીક છે.",
        "te": "తక్కువ నమ్మకం: ఉత్తమ సరిపోలిక {score} కనీస పరిమితి {floor} కి దగ్గరగా ఉంది.",
    },
    # a hedged answer (rag.types.Status.HEDGED, issue 31): the gate was above its hedge floor
    # but not sure; {answer} is the answer text, the [1] points at the first source listed
    "hedged": {
        "en": "I'm not sure this answers it; the closest passage says: {answer} [1]",
        "hi": "मुझे पक्का नहीं कि इससे जवाब मिलता है; सबसे करीबी अंश कहता है: {answer} [1]",
        "gu": "મને ખાતરી નથી કે આ જવાબ આપે છે; સૌથી નજીકનો ફકરો કહે છે: {answer} [1]",
        "te": "ఇది సమాధానమో కాదో నాకు ఖచ్చితంగా తెలియదు; దగ్గరి భాగం ఇలా చెబుతోంది: "
              "{answer} [1]",
    },
    "hedged_spoken": {
        "en": "I'm not sure this answers it; the closest passage says: {answer}",
        "hi": "मुझे पक्का नहीं कि इससे जवाब मिलता है; सबसे करीबी अंश कहता है: {answer}",
        "gu": "મને ખાતરી નથી કે આ જવાબ આપે છે; સૌથી નજીકનો ફકરો કહે છે: {answer}",
        "te": "ఇది సమాధానమో కాదో నాకు ఖచ్చితంగా తెలియదు; దగ్గరి భాగం ఇలా చెబుతోంది: {answer}",
    },
    # an answer cut to fit (bot.chat.limits: the answer_bound stage, or the spoken length)
    "answer_shortened": {
        "en": "This answer was shortened to fit; /why says by how much.",
        "hi": "यह जवाब छोटा करके दिखाया गया है; कितना छोटा किया गया, यह /why बताता है।",
        "gu": "આ જવાબ ટૂંકો કરીને બતાવ્યો છે; કેટલો ટૂંકો કર્યો તે /why કહે છે.",
        "te": "ఈ సమాధానం కుదించి చూపబడింది; ఎంత కుదించబడిందో /why చెబుతుంది.",
    },
    "answer_shortened_spoken": {
        "en": "The answer was shortened.",
        "hi": "जवाब छोटा कर दिया गया है।",
        "gu": "જવાબ ટૂંકો કરવામાં આવ્યો છે.",
        "te": "సమాధానం కుదించబడింది.",
    },
    "generative_fallback": {
        "en": "A generated answer was not available ({reason}); answered from the passage.",
        "hi": "रचित जवाब उपलब्ध नहीं था ({reason}); जवाब सीधे अंश से दिया गया है।",
        "gu": "રચિત જવાબ ઉપલબ્ધ ન હતો ({reason}); જવાબ સીધો ફકરામાંથી આપ્યો છે.",
        "te": "రచిత సమాధానం అందుబాటులో లేదు ({reason}); సమాధానం నేరుగా భాగం నుండి ఇవ్వబడింది.",
    },
    # reasons shown in generative_fallback, one per kind of rag.generative fallback code
    "fallback_service": {
        "en": "service unavailable", "hi": "सेवा उपलब्ध नहीं", "gu": "સેવા ઉપલબ્ધ નથી",
        "te": "సేవ అందుబాటులో లేదు",
    },
    "fallback_malformed": {
        "en": "malformed reply", "hi": "जवाब का रूप गलत", "gu": "જવાબનું સ્વરૂપ ખોટું",
        "te": "సమాధాన రూపం తప్పు",
    },
    "fallback_language": {
        "en": "written in another language", "hi": "दूसरी भाषा में लिखा गया",
        "gu": "બીજી ભાષામાં લખાયેલો", "te": "వేరే భాషలో రాయబడింది",
    },
    "fallback_unsupported": {
        "en": "not supported by the passages", "hi": "अंशों से समर्थित नहीं",
        "gu": "ફકરાઓથી સમર્થિત નથી", "te": "భాగాల మద్దతు లేదు",
    },
    "sources": {"en": "Sources", "hi": "स्रोत", "gu": "સ્રોતો", "te": "మూలాలు"},
    "score": {"en": "score", "hi": "स्कोर", "gu": "સ્કોર", "te": "స్కోర్"},
    "you_said": {"en": "You said:", "hi": "आपने कहा:", "gu": "તમે કહ્યું:", "te": "మీరు అన్నారు:"},
    "answer_from": {
        "en": "Answer taken from a passage in {language}.",
        "hi": "जवाब {language} के अंश से लिया गया है।",
        "gu": "જવાબ {language} ફકરામાંથી લીધો છે.",
        "te": "సమాధానం {language} భాగం నుండి తీసుకోబడింది.",
    },
    # ---- /lang and /mode
    "lang_set": {
        "en": "Answer language set to {language}.",
        "hi": "जवाब की भाषा {language} कर दी गई है।",
        "gu": "જવાબની ભાષા {language} કરી દેવામાં આવી છે.",
        "te": "సమాధాన భాష {language}గా మార్చబడింది.",
    },
    "lang_auto": {
        "en": "Answer language: automatic (the language you ask in).",
        "hi": "जवाब की भाषा: स्वचालित (जिस भाषा में आप पूछें)।",
        "gu": "જવાબની ભાષા: આપમેળે (તમે જે ભાષામાં પૂછો તે).",
        "te": "సమాధాన భాష: ఆటోమేటిక్ (మీరు అడిగే భాష).",
    },
    "lang_current": {
        "en": "Answer language: {language}.",
        "hi": "जवाब की भाषा: {language}।",
        "gu": "જવાબની ભાષા: {language}.",
        "te": "సమాధాన భాష: {language}.",
    },
    "lang_usage": {
        "en": "Usage: /lang en | hi | gu | te | auto",
        "hi": "उपयोग: /lang en | hi | gu | te | auto",
        "gu": "ઉપયોગ: /lang en | hi | gu | te | auto",
        "te": "వాడుక: /lang en | hi | gu | te | auto",
    },
    "mode_set": {
        "en": "Answer mode set to {mode}.",
        "hi": "जवाब का तरीका बदलकर {mode} कर दिया गया है।",
        "gu": "જવાબની રીત બદલીને {mode} કરી દેવામાં આવી છે.",
        "te": "సమాధాన విధానం {mode}గా మార్చబడింది.",
    },
    "mode_current": {
        "en": "Answer mode: {mode}.",
        "hi": "जवाब का तरीका: {mode}।",
        "gu": "જવાબની રીત: {mode}.",
        "te": "సమాధాన విధానం: {mode}.",
    },
    "mode_usage": {
        "en": "Usage: /mode extractive | generative",
        "hi": "उपयोग: /mode extractive | generative",
        "gu": "ઉપયોગ: /mode extractive | generative",
        "te": "వాడుక: /mode extractive | generative",
    },
    "mode_no_llm_key": {
        "en": "Without OPENROUTER_API_KEY, answers stay extractive (sentences quoted from the "
              "sources).",
        "hi": "OPENROUTER_API_KEY के बिना जवाब उद्धरण ही रहेंगे (स्रोतों से सीधे लिए गए वाक्य)।",
        "gu": "OPENROUTER_API_KEY વિના જવાબો અવતરણ જ રહેશે (સ્રોતોમાંથી સીધાં લીધેલાં વાક્યો).",
        "te": "OPENROUTER_API_KEY లేకుండా సమాధానాలు ఉల్లేఖనగానే ఉంటాయి (మూలాల నుండి నేరుగా "
              "తీసుకున్న వాక్యాలు).",
    },
    # ---- /voice (spoken replies)
    "voice_on": {
        "en": "Spoken replies: on. Every answer also comes as a voice note.",
        "hi": "बोलकर जवाब: चालू। हर जवाब वॉइस नोट में भी आएगा।",
        "gu": "બોલીને જવાબ: ચાલુ. દરેક જવાબ વૉઇસ નોટમાં પણ આવશે.",
        "te": "మాటల సమాధానం: ఆన్. ప్రతి సమాధానం వాయిస్ నోట్‌గా కూడా వస్తుంది.",
    },
    "voice_off": {
        "en": "Spoken replies: off. Answers come as text only.",
        "hi": "बोलकर जवाब: बंद। जवाब केवल लिखकर आएँगे।",
        "gu": "બોલીને જવાબ: બંધ. જવાબ ફક્ત લખાણમાં આવશે.",
        "te": "మాటల సమాధానం: ఆఫ్. సమాధానాలు రాతలో మాత్రమే వస్తాయి.",
    },
    "voice_auto": {
        "en": "Spoken replies: automatic. Questions asked by voice note also get a voice note.",
        "hi": "बोलकर जवाब: स्वचालित। वॉइस नोट से पूछे गए सवालों का जवाब वॉइस नोट में भी आएगा।",
        "gu": "બોલીને જવાબ: આપમેળે. વૉઇસ નોટથી પૂછેલા પ્રશ્નોનો જવાબ વૉઇસ નોટમાં પણ આવશે.",
        "te": "మాటల సమాధానం: ఆటో. వాయిస్ నోట్‌తో అడిగిన ప్రశ్నలకు సమాధానం వాయిస్ నోట్‌గా "
              "కూడా వస్తుంది.",
    },
    "voice_usage": {
        "en": "Use /voice on, /voice off or /voice auto.",
        "hi": "/voice on, /voice off या /voice auto लिखें।",
        "gu": "/voice on, /voice off અથવા /voice auto લખો.",
        "te": "/voice on, /voice off లేదా /voice auto అని పంపండి.",
    },
    "voice_no_key": {
        "en": "Without SARVAM_API_KEY, answers stay text only.",
        "hi": "SARVAM_API_KEY के बिना जवाब केवल लिखकर आएँगे।",
        "gu": "SARVAM_API_KEY વિના જવાબ ફક્ત લખાણમાં આવશે.",
        "te": "SARVAM_API_KEY లేకుండా సమాధానాలు రాతలో మాత్రమే వస్తాయి.",
    },
    "mode_extractive": {
        "en": "extractive (sentences quoted from the sources)",
        "hi": "उद्धरण (स्रोतों से सीधे लिए गए वाक्य)",
        "gu": "અવતરણ (સ્રોતોમાંથી સીધાં લીધેલાં વાક્યો)",
        "te": "ఉల్లేఖన (మూలాల నుండి నేరుగా తీసుకున్న వాక్యాలు)",
    },
    "mode_generative": {
        "en": "generative (written from the sources)",
        "hi": "रचित (स्रोतों के आधार पर लिखा गया)",
        "gu": "રચિત (સ્રોતોના આધારે લખાયેલ)",
        "te": "రచిత (మూలాల ఆధారంగా రాసినది)",
    },
    # ---- /why
    "why_header": {
        "en": "How I decided the last answer:",
        "hi": "पिछला जवाब कैसे तय हुआ:",
        "gu": "છેલ્લો જવાબ કેવી રીતે નક્કી થયો:",
        "te": "చివరి సమాధానం ఎలా నిర్ణయించబడింది:",
    },
    "why_query": {
        "en": "Question: {query}",
        "hi": "सवाल: {query}",
        "gu": "પ્રશ્ન: {query}",
        "te": "ప్రశ్న: {query}",
    },
    "why_total": {"en": "Total", "hi": "कुल", "gu": "કુલ", "te": "మొత్తం"},
    "why_not_an_answer": {
        "en": "That message was not an answer, so there is no decision to show. Send /why for "
              "the last one.",
        "hi": "वह संदेश कोई जवाब नहीं था, इसलिए दिखाने को कोई निर्णय नहीं है। पिछले जवाब के लिए "
              "/why भेजें।",
        "gu": "તે સંદેશ જવાબ ન હતો, તેથી બતાવવા માટે કોઈ નિર્ણય નથી. છેલ્લા જવાબ માટે /why મોકલો.",
        "te": "ఆ సందేశం సమాధానం కాదు, కాబట్టి చూపించడానికి నిర్ణయం లేదు. చివరి దాని కోసం /why "
              "పంపండి.",
    },
    "repeat_question": {
        "en": "You asked this a moment ago: my answer is above.",
        "hi": "आपने यह अभी-अभी पूछा था: मेरा जवाब ऊपर है।",
        "gu": "તમે આ હમણાં જ પૂછ્યું હતું: મારો જવાબ ઉપર છે.",
        "te": "మీరు ఇది ఇప్పుడే అడిగారు: నా సమాధానం పైన ఉంది.",
    },
    # "tell me more", "और बताओ" after an answer (bot.chat.questions.reply_to_text): searching
    # them with the previous question would only repeat its answer
    "cannot_continue": {
        "en": "I cannot continue an answer, but I can take another question on its topic: a "
              "short one such as \"and a big one?\" is read together with your previous "
              "question. /new starts afresh.",
        "hi": "मैं किसी जवाब को आगे नहीं बढ़ा सकता, पर उसी विषय पर दूसरा सवाल ले सकता हूँ: "
              "\"और बड़े वाले में?\" जैसा छोटा सवाल आपके पिछले सवाल के साथ पढ़ा जाता है। /new से "
              "नई शुरुआत होती है।",
        "gu": "હું કોઈ જવાબને આગળ વધારી શકતો નથી, પણ એ જ વિષય પર બીજો પ્રશ્ન લઈ શકું છું: "
              "\"અને મોટામાં?\" જેવો ટૂંકો પ્રશ્ન તમારા અગાઉના પ્રશ્ન સાથે વંચાય છે. /new થી "
              "નવી શરૂઆત થાય છે.",
        "te": "నేను ఒక సమాధానాన్ని కొనసాగించలేను, కానీ అదే విషయంపై మరో ప్రశ్న తీసుకోగలను: "
              "\"మరి పెద్దదానిలో?\" వంటి చిన్న ప్రశ్న మీ మునుపటి ప్రశ్నతో కలిపి "
              "చదవబడుతుంది. /new తో కొత్తగా మొదలవుతుంది.",
    },
    # ---- follow-ups (bot.chat.conversation): /new, and how /why says a message was read
    "new_conversation": {
        "en": "Starting afresh: your next message is read on its own, not with your previous "
              "question.",
        "hi": "नई शुरुआत: आपका अगला संदेश अकेले पढ़ा जाएगा, पिछले सवाल के साथ नहीं।",
        "gu": "નવી શરૂઆત: તમારો આગળનો સંદેશ એકલો વંચાશે, અગાઉના પ્રશ્ન સાથે નહીં.",
        "te": "కొత్తగా మొదలు: మీ తదుపరి సందేశం విడిగా చదవబడుతుంది, మునుపటి ప్రశ్నతో కలిపి "
              "కాదు.",
    },
    "why_followup_used": {
        "en": "Read as a follow-up of your previous question, searched as: {searched}",
        "hi": "आपके पिछले सवाल के आगे के सवाल के रूप में पढ़ा गया, ऐसे खोजा गया: {searched}",
        "gu": "તમારા અગાઉના પ્રશ્નના અનુસંધાનમાં વાંચ્યો, આ રીતે શોધ્યો: {searched}",
        "te": "మీ మునుపటి ప్రశ్నకు కొనసాగింపుగా చదివాను, ఇలా వెతికాను: {searched}",
    },
    "why_followup_alone": {
        "en": "Read on its own, not as a follow-up of your previous question.",
        "hi": "अकेले पढ़ा गया, पिछले सवाल के आगे के सवाल के रूप में नहीं।",
        "gu": "એકલો વાંચ્યો, અગાઉના પ્રશ્નના અનુસંધાનમાં નહીં.",
        "te": "విడిగా చదివాను, మునుపటి ప్రశ్నకు కొనసాగింపుగా కాదు.",
    },
    "why_empty": {
        "en": "Nothing to explain yet: ask a question first.",
        "hi": "अभी बताने को कुछ नहीं है: पहले कोई सवाल पूछें।",
        "gu": "હજી સમજાવવા જેવું કંઈ નથી: પહેલાં પ્રશ્ન પૂછો.",
        "te": "ఇంకా వివరించడానికి ఏమీ లేదు: ముందుగా ఒక ప్రశ్న అడగండి.",
    },
    # ---- the decision in plain words (bot.chat.render.why_summary): the web page's "Why?"
    "why_summary_answered": {
        "en": "Answered: the closest passage matched your question with a score of {score}, "
              "above the {floor} a question in {language} needs, and it answers it.",
        "hi": "जवाब दिया: सबसे करीबी अंश आपके सवाल से {score} स्कोर पर मिला, जो {language} के "
              "सवाल के लिए ज़रूरी {floor} से ऊपर है, और वह सवाल का जवाब देता है।",
        "gu": "જવાબ આપ્યો: સૌથી નજીકનો ફકરો તમારા પ્રશ્ન સાથે {score} સ્કોરથી મળ્યો, જે "
              "{language} પ્રશ્ન માટે જરૂરી {floor} થી ઉપર છે, અને તે પ્રશ્નનો જવાબ આપે છે.",
        "te": "సమాధానం ఇచ్చాను: దగ్గరి భాగం మీ ప్రశ్నతో {score} స్కోర్‌తో సరిపోలింది, ఇది "
              "{language} ప్రశ్నకు కావలసిన {floor} కంటే ఎక్కువ, అది ప్రశ్నకు సమాధానం ఇస్తుంది.",
    },
    "why_summary_hedged": {
        "en": "Answered, but not sure: the closest passage matched with a score of {score} (a "
              "question in {language} needs {floor}), but the check of whether it answers the "
              "question was {percent}% sure, below the {needed}% it takes to answer plainly.",
        "hi": "जवाब दिया, पर पक्का नहीं: सबसे करीबी अंश {score} स्कोर पर मिला ({language} के "
              "सवाल के लिए {floor} ज़रूरी है), पर यह जाँच कि वह सवाल का जवाब देता है, केवल "
              "{percent}% पक्की थी, सीधे जवाब के लिए ज़रूरी {needed}% से कम।",
        "gu": "જવાબ આપ્યો, પણ ખાતરી નથી: સૌથી નજીકનો ફકરો {score} સ્કોરથી મળ્યો ({language} "
              "પ્રશ્ન માટે {floor} જરૂરી છે), પણ તે પ્રશ્નનો જવાબ આપે છે કે નહીં તેની તપાસ ફક્ત "
              "{percent}% ખાતરીવાળી હતી, સીધા જવાબ માટે જરૂરી {needed}% કરતાં ઓછી.",
        "te": "సమాధానం ఇచ్చాను, కానీ ఖచ్చితంగా తెలియదు: దగ్గరి భాగం {score} స్కోర్‌తో "
              "సరిపోలింది ({language} ప్రశ్నకు {floor} కావాలి), కానీ అది ప్రశ్నకు సమాధానమా అనే "
              "తనిఖీ {percent}% మాత్రమే ఖచ్చితంగా ఉంది, నేరుగా సమాధానానికి కావలసిన {needed}% "
              "కంటే తక్కువ.",
    },
    "why_summary_refused": {
        "en": "Not answered: {reason}",
        "hi": "जवाब नहीं दिया: {reason}",
        "gu": "જવાબ આપ્યો નહીં: {reason}",
        "te": "సమాధానం ఇవ్వలేదు: {reason}",
    },
    "why_summary_error": {
        "en": "Not answered: something failed on my side; the steps below show where.",
        "hi": "जवाब नहीं दिया: मेरी ओर से कुछ गड़बड़ हुई; नीचे के चरण दिखाते हैं कि कहाँ।",
        "gu": "જવાબ આપ્યો નહીં: મારી બાજુએ કંઈક ખોટું થયું; નીચેનાં પગલાં બતાવે છે કે ક્યાં.",
        "te": "సమాధానం ఇవ్వలేదు: నా వైపు ఏదో విఫలమైంది; ఎక్కడ అనేది కింది దశలు చూపిస్తాయి.",
    },
    "why_summary_time": {
        "en": "It took {seconds} s in {n_steps} step(s):",
        "hi": "इसमें {n_steps} चरणों में {seconds} सेकंड लगे:",
        "gu": "આમાં {n_steps} પગલાંમાં {seconds} સેકંડ લાગી:",
        "te": "దీనికి {n_steps} దశల్లో {seconds} సెకన్లు పట్టింది:",
    },
    # ---- the web page (bot.web): labels around the replies, in the reply's language
    "web_tagline": {
        "en": "Answers in English, Hindi, Gujarati or Telugu, only from the passage corpus, "
              "with sources.",
        "hi": "अंग्रेज़ी, हिंदी, गुजराती या तेलुगु में जवाब, केवल अंशों के संग्रह से, स्रोतों के साथ।",
        "gu": "અંગ્રેજી, હિન્દી, ગુજરાતી કે તેલુગુમાં જવાબ, ફક્ત ફકરાઓના સંગ્રહમાંથી, સ્રોતો સાથે.",
        "te": "ఇంగ్లీష్, హిందీ, గుజరాతీ లేదా తెలుగులో సమాధానాలు, భాగాల సంకలనం నుండి మాత్రమే, "
              "మూలాలతో.",
    },
    "web_intro": {
        "en": "Ask a question below, e.g. “How much does an Xbox 360 cost?” or “छोटे खीरे में "
              "कैलोरी की मात्रा”. Type /why for the last answer’s decision chain, /lang hi to "
              "fix the language, /voice on for spoken replies.",
        "hi": "नीचे सवाल पूछें, जैसे “छोटे खीरे में कैलोरी की मात्रा” या “How much does an Xbox "
              "360 cost?”। पिछले जवाब का निर्णय देखने के लिए /why, भाषा तय करने के लिए /lang hi, "
              "बोलकर जवाब के लिए /voice on लिखें।",
        "gu": "નીચે પ્રશ્ન પૂછો, જેમ કે “How much does an Xbox 360 cost?”. છેલ્લા જવાબનો "
              "નિર્ણય જોવા /why, ભાષા નક્કી કરવા /lang gu, બોલીને જવાબ માટે /voice on લખો.",
        "te": "కింద ప్రశ్న అడగండి, ఉదాహరణకు “How much does an Xbox 360 cost?”. చివరి "
              "సమాధానం నిర్ణయం కోసం /why, భాష నిర్ణయించడానికి /lang te, మాటల సమాధానం కోసం "
              "/voice on అని టైప్ చేయండి.",
    },
    "web_question_label": {"en": "Your question", "hi": "आपका सवाल", "gu": "તમારો પ્રશ્ન",
                           "te": "మీ ప్రశ్న"},
    "web_placeholder": {
        "en": "Type a question, or /why",
        "hi": "सवाल लिखें, या /why",
        "gu": "પ્રશ્ન લખો, અથવા /why",
        "te": "ప్రశ్న టైప్ చేయండి, లేదా /why",
    },
    "web_ask": {"en": "Ask", "hi": "पूछें", "gu": "પૂછો", "te": "అడగండి"},
    "web_record": {"en": "Record a question", "hi": "सवाल रिकॉर्ड करें",
                   "gu": "પ્રશ્ન રેકોર્ડ કરો", "te": "ప్రశ్నను రికార్డ్ చేయండి"},
    "web_stop_send": {"en": "Stop and send", "hi": "रोकें और भेजें", "gu": "રોકો અને મોકલો",
                      "te": "ఆపి పంపండి"},
    "web_record_hint": {
        "en": "Press, say your question near the microphone, then press again to send.",
        "hi": "दबाएँ, माइक्रोफ़ोन के पास अपना सवाल बोलें, फिर भेजने के लिए दोबारा दबाएँ।",
        "gu": "દબાવો, માઇક્રોફોનની નજીક તમારો પ્રશ્ન બોલો, પછી મોકલવા ફરી દબાવો.",
        "te": "నొక్కండి, మైక్రోఫోన్ దగ్గర మీ ప్రశ్న చెప్పండి, తర్వాత పంపడానికి మళ్లీ నొక్కండి.",
    },
    "web_recording": {
        "en": "Recording… press again to send.",
        "hi": "रिकॉर्ड हो रहा है… भेजने के लिए दोबारा दबाएँ।",
        "gu": "રેકોર્ડ થઈ રહ્યું છે… મોકલવા ફરી દબાવો.",
        "te": "రికార్డ్ అవుతోంది… పంపడానికి మళ్లీ నొక్కండి.",
    },
    "web_sending_voice": {
        "en": "Sending your voice note…",
        "hi": "आपका वॉइस नोट भेजा जा रहा है…",
        "gu": "તમારી વૉઇસ નોટ મોકલાઈ રહી છે…",
        "te": "మీ వాయిస్ నోట్ పంపబడుతోంది…",
    },
    "web_voice_failed": {
        "en": "Could not send the voice note.",
        "hi": "वॉइस नोट नहीं भेजा जा सका।",
        "gu": "વૉઇસ નોટ મોકલી શકાઈ નહીં.",
        "te": "వాయిస్ నోట్ పంపలేకపోయాను.",
    },
    "web_no_microphone": {
        "en": "No microphone could be used ({error}): type your question instead.",
        "hi": "माइक्रोफ़ोन इस्तेमाल नहीं हो सका ({error}): सवाल लिखकर पूछें।",
        "gu": "માઇક્રોફોન વાપરી શકાયો નહીં ({error}): પ્રશ્ન લખીને પૂછો.",
        "te": "మైక్రోఫోన్ వాడలేకపోయాను ({error}): ప్రశ్నను టైప్ చేయండి.",
    },
    "web_answering": {"en": "Answering…", "hi": "जवाब तैयार हो रहा है…",
                      "gu": "જવાબ તૈયાર થઈ રહ્યો છે…", "te": "సమాధానం సిద్ధమవుతోంది…"},
    "web_you_asked": {"en": "You asked", "hi": "आपने पूछा", "gu": "તમે પૂછ્યું",
                      "te": "మీరు అడిగారు"},
    "web_your_voice": {"en": "Your voice note", "hi": "आपका वॉइस नोट", "gu": "તમારી વૉઇસ નોટ",
                       "te": "మీ వాయిస్ నోట్"},
    "web_kind_confident": {"en": "confident", "hi": "भरोसेमंद", "gu": "વિશ્વસનીય",
                           "te": "నమ్మకమైనది"},
    "web_kind_hedged": {"en": "not sure", "hi": "पक्का नहीं", "gu": "ખાતરી નથી",
                        "te": "ఖచ్చితం కాదు"},
    "web_kind_refused": {"en": "not answered", "hi": "जवाब नहीं", "gu": "જવાબ નથી",
                         "te": "సమాధానం లేదు"},
    "web_kind_error": {"en": "error", "hi": "गड़बड़ी", "gu": "ભૂલ", "te": "లోపం"},
    "web_kind_pending": {"en": "answering…", "hi": "जवाब आ रहा है…", "gu": "જવાબ આવી રહ્યો છે…",
                         "te": "సమాధానం వస్తోంది…"},
    "web_no_reply": {
        "en": "No reply: too many messages in a short time, or the same question again.",
        "hi": "कोई जवाब नहीं: कम समय में बहुत सारे संदेश, या वही सवाल दोबारा।",
        "gu": "કોઈ જવાબ નહીં: ટૂંકા સમયમાં ઘણા બધા સંદેશા, અથવા એ જ પ્રશ્ન ફરીથી.",
        "te": "సమాధానం లేదు: తక్కువ సమయంలో చాలా సందేశాలు, లేదా అదే ప్రశ్న మళ్లీ.",
    },
    "web_spoken_reply": {
        "en": "Spoken reply ({seconds} s)",
        "hi": "बोलकर जवाब ({seconds} सेकंड)",
        "gu": "બોલીને જવાબ ({seconds} સેકંડ)",
        "te": "మాటల సమాధానం ({seconds} సెకన్లు)",
    },
    "web_why": {"en": "Why?", "hi": "क्यों?", "gu": "કેમ?", "te": "ఎందుకు?"},
    "web_why_more": {
        "en": "how this reply was decided",
        "hi": "यह जवाब कैसे तय हुआ",
        "gu": "આ જવાબ કેવી રીતે નક્કી થયો",
        "te": "ఈ సమాధానం ఎలా నిర్ణయించబడింది",
    },
    "web_step": {"en": "Step", "hi": "चरण", "gu": "પગલું", "te": "దశ"},
    "web_outcome": {"en": "Outcome", "hi": "नतीजा", "gu": "પરિણામ", "te": "ఫలితం"},
    "web_detail": {"en": "Detail", "hi": "विवरण", "gu": "વિગત", "te": "వివరం"},
    "web_decision": {"en": "decision {id}", "hi": "निर्णय {id}", "gu": "નિર્ણય {id}",
                     "te": "నిర్ణయం {id}"},
    "web_show_passage": {
        "en": "Show the whole passage",
        "hi": "पूरा अंश दिखाएँ",
        "gu": "આખો ફકરો બતાવો",
        "te": "పూర్తి భాగం చూపించండి",
    },
    "web_passage_in": {
        "en": "Passage in {language}",
        "hi": "{language} में अंश",
        "gu": "{language}માં ફકરો",
        "te": "{language}లో భాగం",
    },
    "web_match": {"en": "match {score}", "hi": "मिलान {score}", "gu": "મેળ {score}",
                  "te": "సరిపోలిక {score}"},
    "web_notice_empty": {
        "en": "Type a question first.",
        "hi": "पहले सवाल लिखें।",
        "gu": "પહેલાં પ્રશ્ન લખો.",
        "te": "ముందుగా ప్రశ్న టైప్ చేయండి.",
    },
    "web_notice_too_big": {
        "en": "That recording is over {max_mb} MB: please record a shorter question.",
        "hi": "यह रिकॉर्डिंग {max_mb} MB से बड़ी है: कृपया छोटा सवाल रिकॉर्ड करें।",
        "gu": "આ રેકોર્ડિંગ {max_mb} MB થી મોટું છે: કૃપા કરીને ટૂંકો પ્રશ્ન રેકોર્ડ કરો.",
        "te": "ఈ రికార్డింగ్ {max_mb} MB కంటే పెద్దది: దయచేసి చిన్న ప్రశ్నను రికార్డ్ చేయండి.",
    },
    "web_notice_no_audio": {
        "en": "No recording arrived: please record your question again.",
        "hi": "कोई रिकॉर्डिंग नहीं पहुँची: कृपया अपना सवाल फिर से रिकॉर्ड करें।",
        "gu": "કોઈ રેકોર્ડિંગ પહોંચ્યું નહીં: કૃપા કરીને તમારો પ્રશ્ન ફરીથી રેકોર્ડ કરો.",
        "te": "రికార్డింగ్ ఏదీ రాలేదు: దయచేసి మీ ప్రశ్నను మళ్లీ రికార్డ్ చేయండి.",
    },
    "web_over_limit": {
        "en": "{n_chars} characters: only the first {max_chars} will be read.",
        "hi": "{n_chars} अक्षर: केवल पहले {max_chars} पढ़े जाएँगे।",
        "gu": "{n_chars} અક્ષરો: ફક્ત પહેલા {max_chars} વંચાશે.",
        "te": "{n_chars} అక్షరాలు: మొదటి {max_chars} మాత్రమే చదవబడతాయి.",
    },
    "web_demo_voice": {
        "en": "Voice demo: speech-to-text is a local stand-in, so transcripts are scripted. "
              "Whatever you record is heard as “{transcript}”.",
        "hi": "आवाज़ का डेमो: आवाज़ से लिखने वाली सेवा यहाँ एक स्थानीय नकल है, इसलिए लिखा हुआ "
              "पहले से तय है। आप जो भी रिकॉर्ड करें, वह “{transcript}” सुना जाएगा।",
        "gu": "અવાજનો ડેમો: અવાજથી લખાણ બનાવતી સેવા અહીં સ્થાનિક નકલ છે, તેથી લખાણ પહેલેથી નક્કી "
              "છે. તમે જે પણ રેકોર્ડ કરો, તે “{transcript}” તરીકે સંભળાશે.",
        "te": "వాయిస్ డెమో: మాటను రాతగా మార్చే సేవ ఇక్కడ స్థానిక ప్రత్యామ్నాయం, కాబట్టి రాత ముందే "
              "నిర్ణయించబడింది. మీరు ఏది రికార్డ్ చేసినా “{transcript}” అని వినబడుతుంది.",
    },
}

LANGUAGE_NAMES: dict[str, dict[str, str]] = {
    "en": {"en": "English", "hi": "Hindi", "gu": "Gujarati", "te": "Telugu"},
    "hi": {"en": "अंग्रेज़ी", "hi": "हिंदी", "gu": "गुजराती", "te": "तेलुगु"},
    "gu": {"en": "અંગ્રેજી", "hi": "હિન્દી", "gu": "ગુજરાતી", "te": "તેલુગુ"},
    "te": {"en": "ఇంగ్లీష్", "hi": "హిందీ", "gu": "గుజరాతీ", "te": "తెలుగు"},
}
"""``LANGUAGE_NAMES[ui_lang][code]``: the name of language ``code`` written in ``ui_lang``."""


def t(key: str, lang: str, **kwargs: object) -> str:
    """The message ``key`` in ``lang`` (falling back to English), formatted with ``kwargs``.

    Raises:
        KeyError: unknown ``key``, or a placeholder missing from ``kwargs``.
    """
    variants = MESSAGES[key]
    template = variants.get(lang) or variants[DEFAULT_LANG]
    return template.format(**kwargs)


def language_name(code: str, lang: str) -> str:
    """Name of language ``code`` in the UI language ``lang`` (``code`` itself if unknown)."""
    names = LANGUAGE_NAMES.get(lang, LANGUAGE_NAMES[DEFAULT_LANG])
    return names.get(code, code)
